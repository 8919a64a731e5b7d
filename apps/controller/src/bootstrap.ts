import { StartOptions, StartedApp, startApp } from './app';
import { RuntimeApiBackend } from './backend';
import { RuntimeOverrides, buildRuntime } from './composition';
import { AppConfig } from './config';
import { SqliteHealthProbe } from './health/health-probe';
import { MemoryHttpModule } from './memory/memory-http.module';
import { LogTaskReadModel } from './task-views';

/** The runtime composition (storage, tools, permissions, model) served over HTTP and WebSocket. */
export async function bootController(config: AppConfig, options: StartOptions & { overrides?: RuntimeOverrides } = {}): Promise<StartedApp> {
  const built = await buildRuntime(config, { defaultAllowedRoot: './data/workspace', ...options.overrides });
  const probe = new SqliteHealthProbe(config.RUNLEDGER_DB, () => null);
  const backend = new RuntimeApiBackend({
    commands: built.service,
    store: built.store,
    bus: built.bus,
    tasks: new LogTaskReadModel(built.store),
    health: () => probe.check(),
    close: async () => {
      probe.close();
      await built.close();
    },
  });
  try {
    return await startApp(config, backend, { ...options, modules: [MemoryHttpModule.forRoot(built.memory?.service ?? null), ...(options.modules ?? [])] });
  } catch (err) {
    await backend.close();
    throw err;
  }
}
