import { useEffect, useState } from "preact/hooks";
import { S, language, msg, t, type Lang, type Msg } from "./strings";
import type { WhoAmIResponse } from "./gen/ichor/v1alpha1/user_pb";
import { api, isUnauthenticated, refusal } from "./lib/api";
import { session, type EndReason } from "./lib/session";
import { SignIn } from "./pages/SignIn";
import { SignInError } from "./lib/login";
import { completeExternalSignIn, isExternalSession } from "./lib/external";
import { MustChange } from "./pages/ChangePassword";
import { Account, AccountMenu } from "./pages/Account";
import { MustEnrol } from "./pages/Factors";
import { Users } from "./pages/Users";
import { LanguageSwitch } from "./pages/LanguageSwitch";

type View =
  | { kind: "loading" }
  | { kind: "signedOut"; notice?: Msg }
  | { kind: "error"; message: Msg }
  | { kind: "ready"; me: WhoAmIResponse; enrol: boolean };

const NOTICES: Record<EndReason, Msg | undefined> = {
  signedOut: undefined,
  expired: msg("sessionEnded"),
  copiedTab: undefined,
};

function currentPath(): string {
  return location.pathname === "/auth/callback" ? "/" : location.pathname;
}

export function App() {
  const [view, setView] = useState<View>({ kind: "loading" });
  const [path, setPath] = useState(currentPath());
  const [, setLang] = useState<Lang>(language());
  const langSwitch = <LanguageSwitch onChange={setLang} />;

  const go = (p: string) => {
    history.pushState(null, "", p);
    setPath(p);
  };

  async function start() {
    if (location.pathname === "/auth/callback") {
      const returned = location.href;
      history.replaceState(null, "", "/");
      const q = new URL(returned).searchParams;
      // The site's identity provider sent the browser back with its answer.
      if (q.has("code") || q.has("error")) {
        try {
          await completeExternalSignIn(returned);
        } catch (e) {
          return setView({ kind: "signedOut", notice: e instanceof SignInError ? e.msg : msg("network") });
        }
      }
    }
    if (!session.idToken()) return setView({ kind: "signedOut" });
    if (!(await session.claimFamily())) return;
    session.schedule();
    try {
      const me = await api.whoAmI({});
      // A person of the external provider has no Ichor factor; a must-change user changes the
      // password first (the policy's gate comes after that one).
      const enrol = !me.mustChange && !isExternalSession(session.idToken()) && me.mustEnrol;
      setView({ kind: "ready", me, enrol });
    } catch (e) {
      if (isUnauthenticated(e)) {
        session.clear();
        setView({ kind: "signedOut", notice: msg("sessionEnded") });
      } else {
        setView({ kind: "error", message: refusal(e) });
      }
    }
  }

  useEffect(() => {
    session.onEnd = (reason) => setView({ kind: "signedOut", notice: NOTICES[reason] });
    const pop = () => setPath(currentPath());
    const visible = () => {
      if (document.visibilityState === "visible") void session.becameVisible();
    };
    addEventListener("popstate", pop);
    document.addEventListener("visibilitychange", visible);
    void start();
    return () => {
      removeEventListener("popstate", pop);
      document.removeEventListener("visibilitychange", visible);
    };
  }, []);

  const signedOut = () => setView({ kind: "signedOut", notice: msg("sessionEnded") });

  switch (view.kind) {
    case "loading":
      return <main class="center"><p>{S.loading}</p></main>;
    case "signedOut":
      return <SignIn notice={view.notice} extra={langSwitch}
        onSignedIn={() => { setView({ kind: "loading" }); void start(); }} />;
    case "error":
      return <main class="center"><p class="error" role="alert">{t(view.message)}</p></main>;
    case "ready":
      break;
  }
  const me = view.me;
  if (me.mustChange) return <MustChange onSignedOut={signedOut} extra={langSwitch} />;
  if (view.enrol) return <MustEnrol me={me} onSignedOut={signedOut} extra={langSwitch} />;
  // The built-in roles let only admins read IchorUsers (ichor-operator and ichor-viewer have no
  // verb on `ichorusers`), so the Users page is offered to admins only.
  const canSeeUsers = me.roles.includes("admin");
  const page = path === "/users" && canSeeUsers ? "users" : "account";
  return (
    <>
      <header class="bar">
        <span class="brand">{S.appName}</span>
        <nav aria-label={S.mainNav}>
          <a href="/account" aria-current={page === "account" ? "page" : undefined}
            onClick={(e) => { e.preventDefault(); go("/account"); }}>{S.account}</a>
          {canSeeUsers && (
            <a href="/users" aria-current={page === "users" ? "page" : undefined}
              onClick={(e) => { e.preventDefault(); go("/users"); }}>{S.users}</a>
          )}
        </nav>
        {langSwitch}
        <AccountMenu me={me} go={go} />
      </header>
      <main class="content">
        {page === "users" ? <Users me={me} /> : <Account me={me} onSignedOut={signedOut} />}
      </main>
    </>
  );
}
