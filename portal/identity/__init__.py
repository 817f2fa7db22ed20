"""Company sign-in: what OIDC, LDAP and SCIM share (the group-to-role mapping, portal.identity.groups)."""
