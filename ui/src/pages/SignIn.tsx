import { useState } from "preact/hooks";
import { S } from "../strings";
import { SignInError, signIn } from "../lib/login";

export function SignIn(props: { notice?: string; onSignedIn: () => void }) {
  const [username, setUsername] = useState("");
  const [password, setPassword] = useState("");
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [busy, setBusy] = useState(false);

  async function submit(ev: Event) {
    ev.preventDefault();
    const e: Record<string, string> = {};
    if (username.trim() === "") e.username = S.enterUserName;
    if (password === "") e.password = S.enterPassword;
    setErrors(e);
    if (Object.keys(e).length) return;
    setBusy(true);
    try {
      await signIn(username.trim(), password);
      props.onSignedIn();
    } catch (err) {
      setErrors({ form: err instanceof SignInError ? err.message : S.network });
    } finally {
      setBusy(false);
    }
  }

  return (
    <main class="center">
      <form class="card" onSubmit={submit} noValidate aria-labelledby="signin-title">
        <h1 id="signin-title">{S.signInTitle}</h1>
        {props.notice && <p class="notice">{props.notice}</p>}
        {errors.form && <p class="error" role="alert">{errors.form}</p>}
        <label>
          {S.userName}
          <input name="username" autoComplete="username" value={username} autoFocus
            aria-invalid={!!errors.username}
            onInput={(e) => setUsername((e.target as HTMLInputElement).value)} />
        </label>
        {errors.username && <p class="field-error">{errors.username}</p>}
        <label>
          {S.password}
          <input name="password" type="password" autoComplete="current-password" value={password}
            aria-invalid={!!errors.password}
            onInput={(e) => setPassword((e.target as HTMLInputElement).value)} />
        </label>
        {errors.password && <p class="field-error">{errors.password}</p>}
        <button type="submit" class="primary" disabled={busy}>{busy ? S.signingIn : S.signIn}</button>
      </form>
    </main>
  );
}
