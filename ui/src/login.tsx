// The issuer's sign-in page (`/oidc/login?ticket=`, the page `ichor auth login` opens): the SPA's
// sign-in card, in the language the SPA would pick, posting the form to the issuer. The issuer
// writes the page's data (ticket, whom the sign-in is for, the last refusal) into a JSON block of
// login.html; no inline script runs, so the page keeps the strict CSP. After a right password, the
// issuer answers the same page with the second step's data (a user with a second factor).
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { S, initLanguage, language, msg, t, type Lang } from "./strings";
import { SignIn } from "./pages/SignIn";
import { FactorCard } from "./pages/FactorCard";
import { LanguageSwitch } from "./pages/LanguageSwitch";
import {
  SIGN_IN_DATA_ID, parseFactorPage, parseSignInPage, purposeOf, type FactorPage, type SignInPage,
} from "./lib/signInPage";
import "./styles.css";

function Page(props: { data: SignInPage | FactorPage | null }) {
  const [lang, setLang] = useState<Lang>(language());
  useEffect(() => {
    document.title = S.signInTitle;
  }, [lang]);
  const data = props.data;
  if (!data) {
    return <main class="center"><p class="error" role="alert">{t(msg("signInExpired"))}</p></main>;
  }
  if ("factorTicket" in data) {
    return (
      <FactorCard factors={data.factors} extra={<LanguageSwitch onChange={setLang} />}
        post={{
          factorTicket: data.factorTicket, error: data.error, purpose: purposeOf(data), passkeyOptions: data.passkeyOptions,
        }} />
    );
  }
  return (
    <SignIn
      post={{ ticket: data.ticket, username: data.username, error: data.error, purpose: purposeOf(data) }}
      extra={<LanguageSwitch onChange={setLang} />}
    />
  );
}

initLanguage();
const block = document.getElementById(SIGN_IN_DATA_ID)?.textContent;
const data = parseFactorPage(block) ?? parseSignInPage(block);
const root = document.getElementById("app");
if (root) render(<Page data={data} />, root);
