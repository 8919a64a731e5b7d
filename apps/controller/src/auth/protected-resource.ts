import { SCOPES } from './scopes';

/** Where RFC 9728 puts a protected resource's metadata, before the resource's own path. */
export const PROTECTED_RESOURCE_PATH = '/.well-known/oauth-protected-resource';

/** What the challenge and the metadata need of a request: how it reached us. */
export interface RequestOrigin {
  /** the Host header */
  host: string | undefined;
  /** TLS on the connection (or `req.protocol === 'https'`) */
  secure: boolean;
}

export const originOf = ({ host, secure }: RequestOrigin): string =>
  `${secure ? 'https' : 'http'}://${host ?? 'localhost'}`;

/**
 * RFC 9728 metadata of this service (or of `resourcePath` on it, `/mcp`): bearer tokens in the
 * Authorization header, with our scopes. It names no `authorization_servers`: tokens are issued
 * by the operator (RUNLEDGER_TOKENS / admin.token), never through OAuth, so a client finds no
 * authorization server to start a flow with and asks its user for the token instead.
 */
export function protectedResourceMetadata(origin: string, resourcePath = ''): Record<string, unknown> {
  return {
    resource: `${origin}${resourcePath}`,
    bearer_methods_supported: ['header'],
    scopes_supported: [...SCOPES],
    resource_name: 'Runledger',
    resource_documentation: `${origin}/docs`,
  };
}

/**
 * The `WWW-Authenticate` value of a 401 (RFC 6750 §3, RFC 9728 §5.1): `invalid_token` when a token
 * was sent and refused, no error code when none was sent; `resource_metadata` points at the
 * metadata above so an MCP client learns that no OAuth flow is offered.
 */
export function bearerChallenge(origin: string, tokenSent: boolean): string {
  const params = [
    'realm="runledger"',
    ...(tokenSent ? ['error="invalid_token"'] : []),
    `resource_metadata="${origin}${PROTECTED_RESOURCE_PATH}"`,
  ];
  return `Bearer ${params.join(', ')}`;
}
