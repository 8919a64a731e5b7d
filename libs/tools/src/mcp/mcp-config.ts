import { z } from 'zod';

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const envName = z.string().regex(ENV_NAME, 'must be the name of an environment variable');
const refused = (what: string, instead: string) =>
  z
    .never({
      error: `${what} are not accepted here: name the environment variable that holds each in ${instead}`,
    })
    .optional();

/** A server's name is part of its tools' names (`mcp__<server>__<tool>`), so it keeps to what a model's function name allows. */
export const McpServerName = z
  .string()
  .regex(
    /^[a-z][a-z0-9_-]{0,31}$/,
    'must be lowercase letters, digits, _ or -, starting with a letter (at most 32)',
  )
  .refine((n) => !n.includes('__'), 'must not contain "__" (it separates the parts of a tool name)');

const common = {
  name: McpServerName,
  /** per-call time limit of the server's tools */
  timeout_ms: z.number().int().positive().max(3_600_000).default(60_000),
};

/**
 * A stdio server: a child process with only the variables `env_from` names (`{VAR: "ENV_NAME"}`:
 * the child's VAR is the service's ENV_NAME), under bubblewrap when the sandbox uses it.
 */
export const McpStdioServerConfig = z
  .object({
    ...common,
    command: z.string().min(1),
    args: z.array(z.string()).default([]),
    env_from: z.record(envName, envName).default({}),
    /** the child's working folder (default: the allowed root) */
    cwd: z.string().min(1).optional(),
    /** under bubblewrap the child has no network unless this is true */
    network: z.boolean().default(false),
    env: refused('values', 'env_from'),
  })
  .strict();

/** A Streamable HTTP server; `headers_from` (`{Header: "ENV_NAME"}`) carries its tokens. */
export const McpHttpServerConfig = z
  .object({
    ...common,
    url: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }),
    headers_from: z.record(z.string().regex(/^[A-Za-z0-9-]+$/, 'must be a header name'), envName).default({}),
    headers: refused('header values', 'headers_from'),
  })
  .strict();

export type McpServerConfig = McpStdioServerConfig | McpHttpServerConfig;

/** Stdio when it names a command, HTTP when it names a url: the errors are then those of the one it meant. */
export const McpServerConfig = z.unknown().transform((value, ctx): McpServerConfig => {
  const http = typeof value === 'object' && value !== null && 'url' in value && !('command' in value);
  const parsed = (http ? McpHttpServerConfig : McpStdioServerConfig).safeParse(value);
  if (parsed.success) return parsed.data;
  for (const issue of parsed.error.issues)
    ctx.addIssue({ code: 'custom', path: issue.path, message: issue.message });
  return z.NEVER;
});
export type McpStdioServerConfig = z.infer<typeof McpStdioServerConfig>;
export type McpHttpServerConfig = z.infer<typeof McpHttpServerConfig>;

/** RUNLEDGER_MCP_SERVERS: the list, names unique. */
export const McpServersConfig = z
  .array(McpServerConfig)
  .max(50)
  .superRefine((servers, ctx) => {
    const seen = new Set<string>();
    servers.forEach((s, i) => {
      if (seen.has(s.name))
        ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `server ${s.name} is listed twice` });
      seen.add(s.name);
    });
  });

export const isStdioServer = (s: McpServerConfig): s is McpStdioServerConfig => 'command' in s;

/** Every variable a server's config names, each with where it was named, for the boot check that they are set. */
export function mcpEnvReferences(servers: readonly McpServerConfig[]): { path: string; name: string }[] {
  return servers.flatMap((s, i) =>
    Object.entries(isStdioServer(s) ? s.env_from : s.headers_from).map(([key, name]) => ({
      path: `${i}.${isStdioServer(s) ? 'env_from' : 'headers_from'}.${key}`,
      name,
    })),
  );
}
