// A real OpenID Connect provider (panva/oidc-provider) for the identity tests and `make idp`. Not for
// production: its sign-in form takes any password (the library's development interactions), consent is
// implied for the configured clients, and its signing keys are made afresh at each start.
//
//   node idp.mjs CONFIG.json
//
// CONFIG: {"port": 9000, "issuer": "http://127.0.0.1:9000", "clients": [{client_id, client_secret,
// redirect_uris, post_logout_redirect_uris}], "accounts": {"alice": {"email": ..., "email_verified": true,
// "groups": [...], "name": ...}}}. A sign-in as an account not listed is refused.
import { readFileSync } from 'node:fs';

import Provider from 'oidc-provider';

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const { accounts } = config;

const provider = new Provider(config.issuer, {
  clients: config.clients.map((client) => ({
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_post',
    ...client,
  })),
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name', 'preferred_username'],
    groups: ['groups'],
  },
  scopes: ['openid', 'email', 'profile', 'groups'],
  cookies: { keys: [config.cookie_key || 'test-idp-cookie-key'] },
  pkce: { required: () => true },
  features: { devInteractions: { enabled: true }, rpInitiatedLogout: { enabled: true } },
  async findAccount(ctx, id) {
    if (!Object.hasOwn(accounts, id)) return undefined;
    return {
      accountId: id,
      async claims() {
        return { sub: id, preferred_username: id, ...accounts[id] };
      },
    };
  },
  // Consent is implied: the clients here are the portal's own.
  async loadExistingGrant(ctx) {
    const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
    grant.addOIDCScope('openid email profile groups');
    await grant.save();
    return grant;
  },
});
provider.on('server_error', (ctx, error) => console.error('server_error', error));

provider.listen(config.port, '127.0.0.1', () => {
  console.log(`oidc-provider listening at ${config.issuer}`);
});
