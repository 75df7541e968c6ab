// An authorization server for the sign-in tests: panva's oidc-provider (9.13.3), configured:
// dynamic client registration, PKCE S256 required, refresh tokens, resource indicators (RFC 8707)
// with JWT access tokens (RFC 9068) whose `aud` is the resource, `iss` in every authorization
// response (RFC 9207). The only pages of its own: a login form for one user and a consent page.
//
//   node as_server.mjs [--user ada] [--password PW] [--token-ttl SECONDS] [--withheld-scope SCOPE]...
//                      [--secrets-file PATH]
//
// With --secrets-file, every secret it hands out (tokens, client secrets, registration access
// tokens, authorization codes) is appended to PATH as a JSON line {"kind", "value"}: for a test
// that greps outputs for them.
// A withheld scope is one it knows (a client may register for it and ask for it) but grants to
// no resource: a server that requires it keeps answering 403 insufficient_scope.
//
// Listens on 127.0.0.1 (a free port) and prints {"issuer": "http://127.0.0.1:PORT"} on stdout.

import { appendFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import Provider, { errors } from 'oidc-provider';

const { values: opt } = parseArgs({
  options: {
    user: { type: 'string', default: 'ada' },
    password: { type: 'string', default: 'lovelace-1815' },
    'token-ttl': { type: 'string', default: '3600' },
    'withheld-scope': { type: 'string', multiple: true, default: [] },
    'secrets-file': { type: 'string' },
  },
});
const ttl = Number(opt['token-ttl']);
const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const key = { ...privateKey.export({ format: 'jwk' }), kid: 'k-' + randomBytes(4).toString('hex'), use: 'sig', alg: 'RS256' };

function loopbackResource(indicator) {
  try {
    const url = new URL(indicator);
    return url.protocol === 'http:' && url.hostname === '127.0.0.1';
  } catch {
    return false;
  }
}

const configuration = {
  jwks: { keys: [key] },
  cookies: { keys: [randomBytes(32).toString('hex')] },
  scopes: ['openid', 'offline_access', 'mcp:tools', ...opt['withheld-scope']],
  findAccount: async (ctx, id) => ({ accountId: id, claims: async () => ({ sub: id }) }),
  pkce: { required: () => true },
  responseTypes: ['code'],
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  ttl: { AccessToken: ttl, RefreshToken: 24 * 3600 },
  issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: async () => undefined,
      useGrantedResource: async () => true,
      getResourceServerInfo: async (ctx, indicator) => {
        if (!loopbackResource(indicator)) throw new errors.InvalidTarget('unknown resource');
        return { scope: 'mcp:tools', audience: indicator, accessTokenTTL: ttl, accessTokenFormat: 'jwt', jwt: { sign: { alg: 'RS256' } } };
      },
    },
  },
};

const server = createServer();
server.listen(0, '127.0.0.1', () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, configuration);
  provider.on('grant.success', (ctx) => console.error(`grant ${ctx.oidc.params.grant_type}`));
  if (opt['secrets-file']) recordSecrets(provider, opt['secrets-file']);
  provider.on('grant.error', (ctx, err) => console.error('grant.error', err.message));
  const callback = provider.callback();
  server.on('request', (req, res) => {
    if (req.url.startsWith('/interaction/')) {
      interaction(provider, req, res).catch((err) => {
        console.error('interaction error', err.message);
        if (!res.headersSent) res.writeHead(500).end();
      });
    } else {
      callback(req, res);
    }
  });
  process.stdout.write(JSON.stringify({ issuer }) + '\n');
});

const SECRET_FIELDS = ['access_token', 'refresh_token', 'id_token', 'client_secret', 'registration_access_token'];

function recordSecrets(provider, file) {
  const record = (kind, value) => {
    if (typeof value === 'string' && value) appendFileSync(file, JSON.stringify({ kind, value }) + '\n');
  };
  // The token and registration endpoints' answers, as they leave (before Koa serializes them).
  provider.use(async (ctx, next) => {
    await next();
    const body = ctx.body;
    if (body && typeof body === 'object' && !Buffer.isBuffer(body) && typeof body.pipe !== 'function') {
      for (const field of SECRET_FIELDS) record(field, body[field]);
    }
  });
  // Authorization codes travel in a redirect, not a body (an opaque code's value is its jti).
  provider.on('authorization_code.saved', (code) => record('code', code.jti));
}

function page(title, body) {
  return `<!doctype html><meta charset="utf-8"><title>${title}</title><h1>${title}</h1>${body}`;
}

async function form(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return new URLSearchParams(Buffer.concat(chunks).toString());
}

async function interaction(provider, req, res) {
  const details = await provider.interactionDetails(req, res);
  const { uid, prompt, params, session } = details;
  if (req.method === 'GET') {
    res.setHeader('content-type', 'text/html; charset=utf-8');
    if (prompt.name === 'login') {
      res.end(page('Sign in', `<form method="post" action="/interaction/${uid}"><input type="hidden" name="action" value="login">` +
        `<input id="login" name="login"><input id="password" name="password" type="password">` +
        `<button id="submit" type="submit">Sign in</button></form>`));
    } else {
      res.end(page('Authorize', `<form method="post" action="/interaction/${uid}"><input type="hidden" name="action" value="consent">` +
        `<button id="allow" type="submit">Allow</button></form>`));
    }
    return;
  }
  const body = await form(req);
  let result;
  if (body.get('action') === 'login') {
    if (body.get('login') !== opt.user || body.get('password') !== opt.password) {
      res.writeHead(401, { 'content-type': 'text/html; charset=utf-8' }).end(page('Sign in', '<p id="error">Wrong user or password.</p>'));
      return;
    }
    result = { login: { accountId: opt.user } };
  } else {
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
    const missing = prompt.details;
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
    if (missing.missingResourceScopes) {
      for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes)) grant.addResourceScope(indicator, scopes.join(' '));
    }
    result = { consent: { grantId: await grant.save() } };
  }
  await provider.interactionFinished(req, res, result, { mergeWithLastSubmission: false });
}
