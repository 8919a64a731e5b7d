/**
 * Drops the provider keys from the service's own environment once the model clients hold them, so
 * nothing that runs in the service later (plugin code, a child process spawned with the inherited
 * environment) finds them there. It cannot reach /proc/<pid>/environ, which keeps the environment
 * the process started with: the permission policy keeps /proc outside every allowed root for that.
 */
export function scrubProviderKeys(env: NodeJS.ProcessEnv, names: readonly string[]): void {
  for (const name of names) delete env[name];
}
