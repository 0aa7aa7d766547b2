import { useEffect, useState } from "preact/hooks";
import { S, countOf, fmt, t, type Msg } from "../strings";
import type { User, WhoAmIResponse } from "../gen/ichor/v1alpha1/user_pb";
import { api, refusal } from "../lib/api";
import { checkDisplayName, checkEmail, checkName } from "../lib/validate";

const ROLES = ["viewer", "operator", "admin"];

function RolePicker(props: { value: string[]; onChange: (r: string[]) => void; prefix: string; legend?: string }) {
  const extra = props.value.filter((r) => !ROLES.includes(r));
  return (
    <fieldset class="roles">
      <legend>{props.legend ?? S.roles}</legend>
      {[...ROLES, ...extra].map((r) => (
        <label key={r} class="inline">
          <input type="checkbox" name={`${props.prefix}-${r}`} checked={props.value.includes(r)}
            onChange={(e) => {
              const on = (e.target as HTMLInputElement).checked;
              props.onChange(on ? [...props.value, r] : props.value.filter((x) => x !== r));
            }} />
          {r}
        </label>
      ))}
    </fieldset>
  );
}

function CreateUser(props: { onCreated: (name: string, password: string) => void }) {
  const [name, setName] = useState("");
  const [displayName, setDisplayName] = useState("");
  const [email, setEmail] = useState("");
  const [roles, setRoles] = useState<string[]>(["viewer"]);
  const [generate, setGenerate] = useState(true);
  const [errors, setErrors] = useState<Record<string, Msg>>({});
  const [busy, setBusy] = useState(false);

  async function submit(ev: Event) {
    ev.preventDefault();
    const e: Record<string, Msg> = {};
    const n = checkName(name);
    if (n) e.name = n;
    const m = checkEmail(email);
    if (m) e.email = m;
    const d = checkDisplayName(displayName);
    if (d) e.displayName = d;
    setErrors(e);
    if (Object.keys(e).length) return;
    setBusy(true);
    try {
      const r = await api.createUser({
        name, displayName, email, roles,
        initialPassword: generate ? { case: "generatePassword", value: true } : { case: undefined },
      });
      props.onCreated(name, r.generatedPassword);
      setName("");
      setDisplayName("");
      setEmail("");
      setRoles(["viewer"]);
    } catch (err) {
      setErrors({ form: refusal(err) });
    } finally {
      setBusy(false);
    }
  }

  const text = (field: string, label: string, value: string, set: (v: string) => void) => (
    <>
      <label>
        {label}
        <input name={field} value={value} aria-invalid={!!errors[field]}
          aria-describedby={errors[field] ? `new-${field}-error` : undefined}
          onInput={(e) => set((e.target as HTMLInputElement).value)} />
      </label>
      {errors[field] && <p class="field-error" id={`new-${field}-error`}>{t(errors[field])}</p>}
    </>
  );

  return (
    <form class="card" onSubmit={submit} noValidate aria-label={S.createUser}>
      <h2>{S.createUser}</h2>
      {errors.form && <p class="error" role="alert">{S.refused + t(errors.form)}</p>}
      {text("name", S.name, name, setName)}
      {text("displayName", S.displayName, displayName, setDisplayName)}
      {text("email", S.email, email, setEmail)}
      <RolePicker value={roles} onChange={setRoles} prefix="new" />
      <label class="inline">
        <input type="checkbox" name="generate" checked={generate}
          onChange={(e) => setGenerate((e.target as HTMLInputElement).checked)} />
        {S.generatePassword}
      </label>
      <button type="submit" class="primary" disabled={busy}>{S.create}</button>
    </form>
  );
}

function Row(props: { user: User; admin: boolean; onChanged: () => void; onPassword: (n: string, p: string) => void }) {
  const u = props.user;
  const [editing, setEditing] = useState(false);
  const [roles, setRoles] = useState<string[]>(u.roles);
  const [confirmDelete, setConfirmDelete] = useState(false);
  const [error, setError] = useState<Msg | null>(null);
  const [done, setDone] = useState<keyof typeof S | null>(null);

  const act = (what: keyof typeof S, f: () => Promise<unknown>) => async () => {
    setError(null);
    setDone(null);
    try {
      await f();
      setDone(what);
      props.onChanged();
    } catch (e) {
      setError(refusal(e));
    }
  };
  const status = [
    u.disabled ? S.disabled : S.active,
    ...(u.mustChange ? [S.mustChange] : []),
    ...(u.passwordSet ? [] : [S.noPassword]),
  ].join(S.listSeparator);

  return (
    <tr data-user={u.name}>
      <td data-label={S.name}><strong>{u.name}</strong>{u.displayName && <div class="muted">{u.displayName}</div>}</td>
      <td data-label={S.roles}>
        {editing ? (
          <form onSubmit={(e) => { e.preventDefault(); void act("editRoles", async () => {
            await api.updateUser({ name: u.name, roles: { roles } });
            setEditing(false);
          })(); }}>
            <RolePicker value={roles} onChange={setRoles} prefix={`edit-${u.name}`} legend={fmt(S.editRolesOf, { name: u.name })} />
            <button type="submit" class="primary">{S.save}</button>
            <button type="button" onClick={() => { setEditing(false); setRoles(u.roles); }}>{S.cancel}</button>
          </form>
        ) : (
          u.roles.join(S.listSeparator) || S.noRoles
        )}
      </td>
      <td data-label={S.status} class="status">{status}</td>
      {props.admin && (
        <td data-label={S.actions} class="actions">
          <div class="buttons">
            {!editing && <button type="button" onClick={() => setEditing(true)}>{S.editRoles}</button>}
            <button type="button" onClick={act(u.disabled ? "enable" : "disable", () =>
              api.updateUser({ name: u.name, disabled: !u.disabled }))}>
              {u.disabled ? S.enable : S.disable}
            </button>
            <button type="button" onClick={act("resetPassword", async () => {
              const r = await api.setPassword({ name: u.name, newPassword: { case: "generate", value: true } });
              props.onPassword(u.name, r.generatedPassword);
            })}>{S.resetPassword}</button>
            <button type="button" onClick={act("revokeSessions", () => api.revokeSessions({ name: u.name }))}>
              {S.revokeSessions}
            </button>
            {confirmDelete ? (
              <span class="confirm">
                {fmt(S.confirmDelete, { name: u.name })}
                <button type="button" class="danger" onClick={act("delete", () => api.deleteUser({ name: u.name }))}>
                  {S.confirm}
                </button>
                <button type="button" onClick={() => setConfirmDelete(false)}>{S.cancel}</button>
              </span>
            ) : (
              <button type="button" class="danger" onClick={() => setConfirmDelete(true)}>{S.delete}</button>
            )}
          </div>
          {error && <p class="error" role="alert">{S.refused + t(error)}</p>}
          {done && <p class="notice" role="status">{fmt(S.done, { what: S[done] })}</p>}
        </td>
      )}
    </tr>
  );
}

export function Users(props: { me: WhoAmIResponse }) {
  const admin = props.me.roles.includes("admin");
  const [users, setUsers] = useState<User[] | null>(null);
  const [error, setError] = useState<Msg | null>(null);
  const [secret, setSecret] = useState<{ name: string; password: string } | null>(null);

  async function load() {
    try {
      setUsers((await api.listUsers({})).users);
      setError(null);
    } catch (e) {
      setError(refusal(e));
    }
  }
  useEffect(() => void load(), []);
  const showPassword = (name: string, password: string) => {
    if (password) setSecret({ name, password });
    void load();
  };

  return (
    <section class="stack">
      <h1>{S.users}</h1>
      {users && <p class="muted" data-testid="user-count">{countOf(users.length, S.userCountOne, S.userCountOther)}</p>}
      {!admin && <p class="muted">{S.usersReadOnly}</p>}
      {error && <p class="error" role="alert">{S.refused + t(error)}</p>}
      {secret && (
        <div class="secret" role="status">
          <p>{fmt(S.shownOnce, { name: secret.name })}</p>
          <code data-testid="generated-password">{secret.password}</code>
          <button type="button" onClick={() => setSecret(null)}>{S.dismiss}</button>
        </div>
      )}
      {users && (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th>{S.name}</th>
                <th>{S.roles}</th>
                <th>{S.status}</th>
                {admin && <th>{S.actions}</th>}
              </tr>
            </thead>
            <tbody>
              {users.length === 0 && (<tr><td colSpan={4}>{S.noUsers}</td></tr>)}
              {users.map((u) => (
                <Row key={u.name} user={u} admin={admin} onChanged={() => void load()} onPassword={showPassword} />
              ))}
            </tbody>
          </table>
        </div>
      )}
      {admin && <CreateUser onCreated={showPassword} />}
    </section>
  );
}
