import { McpClientManager } from '@runledger/tools';

/**
 * Waits until the registry lists `tool`: server-everything adds its elicitation tool only after
 * initialization and announces it with tools/list_changed, so it may come a moment after boot.
 */
export async function untilListed(
  manager: McpClientManager,
  tool: string,
  timeoutMs = 10_000,
): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; !manager.get(tool);) {
    if (Date.now() > deadline) throw new Error(`${tool} was not listed within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
