// A real external OpenID provider for tests: panva's OpenID-certified `oidc-provider`, on HTTPS
// 127.0.0.1, with static accounts, no passwords, and consent granted on its own. Tokens come
// from the provider's own authorization-code flow with PKCE, driven over HTTP by the `token`
// subcommand; `refresh` uses its refresh-token grant (rotating).
//
//   node server.mjs serve --issuer https://127.0.0.1:PORT --cert FILE --key FILE \
//        --accounts JSON --clients JSON
//     Prints `ready ISSUER` once listening; exits 0 on SIGTERM or SIGINT.
//     Each option may also come from the environment: OIDC_ISSUER, OIDC_CERT, OIDC_KEY,
//     OIDC_ACCOUNTS, OIDC_CLIENTS. A JSON value starting with `@` names a file.
//     accounts: {"alice": {"email": "alice@example.org", "groups": ["dev"]}, ...}: the key is the
//       `sub` and the default `name`; any other claim given is passed as it is.
//     clients: [{"client_id": "kubernetes", "redirect_uris": ["http://127.0.0.1/callback"]}, ...]:
//       client metadata; public (no secret, PKCE) with the code and refresh grants by default.
//
//   node server.mjs token --issuer URL --ca FILE --account alice --client-id kubernetes \
//        [--redirect-uri URI] [--client-secret S] [--scope "openid email profile groups offline_access"]
//   node server.mjs refresh --issuer URL --ca FILE --client-id ID --refresh-token RT [--client-secret S]
//     Print the token endpoint's JSON response (id_token, refresh_token, ...); exit 1 on error.
//   node server.mjs approve --issuer URL --ca FILE --account alice --url AUTHORIZE_URL
//     Follow an authorization request built elsewhere as a browser would (signing `account` in)
//     and print the redirect that leaves the provider (the client's redirect URI with the code).
//
// The sign-in page (for a browser) lists the accounts as buttons; a `login_hint` naming an
// account signs that account in at once.
import { createHash, generateKeyPairSync, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import { parseArgs } from 'node:util';

const DEFAULT_SCOPE = 'openid email profile groups offline_access';
const DEFAULT_REDIRECT = 'http://127.0.0.1/callback';

function fail(message) {
  process.stderr.write(`oidc-provider: ${message}\n`);
  process.exit(1);
}

function option(values, name, env) {
  const value = values[name] ?? process.env[env];
  if (value === undefined || value === '') fail(`--${name} (or ${env}) is required`);
  return value;
}

function json(value, what) {
  const text = value.startsWith('@') ? readFileSync(value.slice(1), 'utf8') : value;
  try {
    return JSON.parse(text);
  } catch (e) {
    return fail(`${what} is not JSON: ${e.message}`);
  }
}

const escape = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function readBody(req) {
  return new Promise((resolve, reject) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk) => {
      body += chunk;
      if (body.length > 65536) reject(new Error('body too large'));
    });
    req.on('end', () => resolve(new URLSearchParams(body)));
    req.on('error', reject);
  });
}

// Our interactions: a login picks one of the static accounts, a consent grants what was asked.
async function interaction(provider, accounts, req, res) {
  const details = await provider.interactionDetails(req, res);
  const { prompt, params, uid } = details;
  if (prompt.name === 'consent') {
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: details.session.accountId, clientId: params.client_id });
    if (prompt.details.missingOIDCScope) grant.addOIDCScope(prompt.details.missingOIDCScope.join(' '));
    if (prompt.details.missingOIDCClaims) grant.addOIDCClaims(prompt.details.missingOIDCClaims);
    const grantId = await grant.save();
    return provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
  }
  if (prompt.name !== 'login') throw new Error(`unexpected prompt ${prompt.name}`);
  const chosen = req.method === 'POST' ? (await readBody(req)).get('login') : params.login_hint;
  if (chosen && Object.hasOwn(accounts, chosen)) {
    return provider.interactionFinished(req, res, { login: { accountId: chosen } }, { mergeWithLastSubmission: false });
  }
  const buttons = Object.keys(accounts)
    .map((a) => `<button type="submit" name="login" value="${escape(a)}">${escape(a)}</button>`)
    .join('\n');
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
  return res.end(`<!doctype html><title>Sign in</title><h1>Sign in to ${escape(params.client_id)}</h1>
<form method="post" action="/interaction/${escape(uid)}">\n${buttons}\n</form>\n`);
}

async function serve(values) {
  // Loaded here only: the token and refresh clients do without it.
  const { default: Provider } = await import('oidc-provider');
  const issuer = option(values, 'issuer', 'OIDC_ISSUER');
  const cert = readFileSync(option(values, 'cert', 'OIDC_CERT'));
  const key = readFileSync(option(values, 'key', 'OIDC_KEY'));
  const accounts = json(option(values, 'accounts', 'OIDC_ACCOUNTS'), 'accounts');
  const clients = json(option(values, 'clients', 'OIDC_CLIENTS'), 'clients').map((c) => ({
    token_endpoint_auth_method: c.client_secret ? 'client_secret_basic' : 'none',
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    redirect_uris: [DEFAULT_REDIRECT],
    ...c,
  }));
  const url = new URL(issuer);

  // A signing key of this run only (the provider's built-in one is the same everywhere).
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = { ...privateKey.export({ format: 'jwk' }), kid: randomBytes(8).toString('hex'), use: 'sig', alg: 'RS256' };

  const provider = new Provider(issuer, {
    clients,
    jwks: { keys: [jwk] },
    cookies: { keys: [randomBytes(32).toString('hex')] },
    scopes: ['openid', 'offline_access', 'email', 'profile', 'groups'],
    claims: {
      openid: ['sub'],
      email: ['email', 'email_verified'],
      profile: ['name', 'preferred_username'],
      groups: ['groups'],
    },
    // The claims belong in the ID token itself: the kube-apiserver reads nothing else.
    conformIdTokenClaims: false,
    async findAccount(_ctx, sub) {
      if (!Object.hasOwn(accounts, sub)) return undefined;
      const claims = { name: sub, preferred_username: sub, email_verified: true, ...accounts[sub], sub };
      return { accountId: sub, claims: async () => claims };
    },
    pkce: { required: () => true },
    rotateRefreshToken: true,
    features: { devInteractions: { enabled: false } },
    interactions: { url: (_ctx, i) => `/interaction/${i.uid}` },
    renderError(ctx, out) {
      ctx.type = 'json';
      ctx.body = out;
    },
  });
  provider.on('server_error', (_ctx, e) => process.stderr.write(`server_error: ${e.stack}\n`));
  for (const event of ['authorization.error', 'grant.error']) {
    provider.on(event, (_ctx, e) => process.stderr.write(`${event}: ${e.message} ${e.error_description ?? ''}\n`));
  }

  // The provider checks a static client when it is first used: check them all now, so that a
  // bad registration fails the start instead of the first sign-in.
  for (const { client_id: id } of clients) {
    try {
      await provider.Client.find(id);
    } catch (e) {
      fail(`client ${id}: ${e.message}${e.error_description ? `: ${e.error_description}` : ''}`);
    }
  }

  const handler = provider.callback();
  const server = https.createServer({ cert, key }, (req, res) => {
    if (req.url.startsWith('/interaction/')) {
      interaction(provider, accounts, req, res).catch((e) => {
        process.stderr.write(`interaction: ${e.stack}\n`);
        if (!res.headersSent) res.writeHead(400, { 'content-type': 'text/plain' });
        res.end(`${e.message}\n`);
      });
    } else {
      handler(req, res);
    }
  });
  server.on('error', (e) => fail(`listening on ${url.port}: ${e.message}`));
  server.listen(Number(url.port || 443), '127.0.0.1', () => process.stdout.write(`ready ${issuer}\n`));
  const stop = () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

// One HTTPS request trusting `ca`, with the cookies of `jar`; no redirect is followed.
function request(ca, jar, method, target, { form, auth } = {}) {
  const headers = { accept: 'application/json' };
  if (jar.size) headers.cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
  const body = form ? new URLSearchParams(form).toString() : undefined;
  if (body) headers['content-type'] = 'application/x-www-form-urlencoded';
  if (auth) headers.authorization = `Basic ${Buffer.from(auth).toString('base64')}`;
  return new Promise((resolve, reject) => {
    const req = https.request(target, { method, headers, ca }, (res) => {
      for (const c of res.headers['set-cookie'] ?? []) {
        const [pair] = c.split(';');
        const at = pair.indexOf('=');
        jar.set(pair.slice(0, at), pair.slice(at + 1));
      }
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => { text += chunk; });
      res.on('end', () => resolve({ status: res.statusCode, location: res.headers.location, text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function discover(ca, issuer) {
  const res = await request(ca, new Map(), 'GET', `${issuer}/.well-known/openid-configuration`);
  if (res.status !== 200) fail(`discovery answered ${res.status}: ${res.text}`);
  return JSON.parse(res.text);
}

async function tokenRequest(ca, metadata, form, clientId, secret) {
  const auth = secret ? `${encodeURIComponent(clientId)}:${encodeURIComponent(secret)}` : undefined;
  const res = await request(ca, new Map(), 'POST', metadata.token_endpoint, {
    form: secret ? form : { ...form, client_id: clientId },
    auth,
  });
  if (res.status !== 200) fail(`token endpoint answered ${res.status}: ${res.text}`);
  return res.text;
}

// The authorization-code flow with PKCE, as a browser would follow it.
async function token(values) {
  const issuer = option(values, 'issuer', 'OIDC_ISSUER');
  const ca = readFileSync(option(values, 'ca', 'OIDC_CA'));
  const account = option(values, 'account', 'OIDC_ACCOUNT');
  const clientId = option(values, 'client-id', 'OIDC_CLIENT_ID');
  const redirectUri = values['redirect-uri'] ?? DEFAULT_REDIRECT;
  const metadata = await discover(ca, issuer);
  const verifier = randomBytes(32).toString('base64url');
  const state = randomBytes(16).toString('base64url');
  const scope = values.scope ?? DEFAULT_SCOPE;
  const authorize = new URL(metadata.authorization_endpoint);
  authorize.search = new URLSearchParams({
    response_type: 'code',
    client_id: clientId,
    redirect_uri: redirectUri,
    scope,
    // OpenID Connect grants offline_access (a refresh token) only with prompt=consent.
    ...(scope.split(' ').includes('offline_access') ? { prompt: 'consent' } : {}),
    state,
    nonce: randomBytes(16).toString('base64url'),
    code_challenge: createHash('sha256').update(verifier).digest('base64url'),
    code_challenge_method: 'S256',
    login_hint: account,
  }).toString();

  const jar = new Map();
  let next = authorize.href;
  for (let hop = 0; hop < 10; hop += 1) {
    const res = await request(ca, jar, 'GET', next);
    if (res.status < 300 || res.status >= 400 || !res.location) {
      fail(`${next} answered ${res.status}: ${res.text}`);
    }
    const target = new URL(res.location, next);
    if (target.href.startsWith(redirectUri)) {
      const q = target.searchParams;
      if (q.get('error')) fail(`authorization refused: ${q.get('error')}: ${q.get('error_description')}`);
      if (q.get('state') !== state) fail('the state came back changed');
      const form = { grant_type: 'authorization_code', code: q.get('code'), redirect_uri: redirectUri, code_verifier: verifier };
      return tokenRequest(ca, metadata, form, clientId, values['client-secret']);
    }
    next = target.href;
  }
  return fail('too many redirects');
}

// A browser approving an authorization request someone else built (the `ichor auth login` URL):
// the account is chosen with login_hint, consent is granted, and the redirect that leaves the
// provider is printed, not followed.
async function approve(values) {
  const issuer = option(values, 'issuer', 'OIDC_ISSUER');
  const ca = readFileSync(option(values, 'ca', 'OIDC_CA'));
  const account = option(values, 'account', 'OIDC_ACCOUNT');
  const start = new URL(option(values, 'url', 'OIDC_URL'));
  start.searchParams.set('login_hint', account);
  const origin = new URL(issuer).origin;
  const jar = new Map();
  let next = start.href;
  for (let hop = 0; hop < 10; hop += 1) {
    const res = await request(ca, jar, 'GET', next);
    if (res.status < 300 || res.status >= 400 || !res.location) {
      fail(`${next} answered ${res.status}: ${res.text}`);
    }
    const target = new URL(res.location, next);
    if (target.origin !== origin) return target.href;
    next = target.href;
  }
  return fail('too many redirects');
}

async function refresh(values) {
  const issuer = option(values, 'issuer', 'OIDC_ISSUER');
  const ca = readFileSync(option(values, 'ca', 'OIDC_CA'));
  const clientId = option(values, 'client-id', 'OIDC_CLIENT_ID');
  const form = { grant_type: 'refresh_token', refresh_token: option(values, 'refresh-token', 'OIDC_REFRESH_TOKEN') };
  return tokenRequest(ca, await discover(ca, issuer), form, clientId, values['client-secret']);
}

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: Object.fromEntries(
    ['issuer', 'cert', 'key', 'accounts', 'clients', 'ca', 'account', 'client-id', 'client-secret',
      'redirect-uri', 'scope', 'refresh-token', 'url'].map((name) => [name, { type: 'string' }]),
  ),
});
const commands = { serve, token, refresh, approve };
const command = commands[positionals[0]];
if (!command) fail('usage: server.mjs serve|token|refresh|approve [options] (see the head of this file)');
Promise.resolve(command(values)).then(
  (out) => { if (out !== undefined) process.stdout.write(`${out}\n`); },
  (e) => fail(e.stack),
);
