import { StartOptions, StartedApp, startApp } from './app';
import { RuntimeApiBackend } from './backend';
import { RuntimeOverrides, buildRuntime } from './composition';
import { AppConfig } from './config';
import { SqliteHealthProbe } from './health/health-probe';
import { MemoryHttpModule } from './memory/memory-http.module';
import { StateStoreTables } from '@runledger/state-store';
import { createLogger } from './logging/logger';
import { HealthReport } from './runtime.port';
import { LogTaskReadModel, ProjectionTaskReadModel } from './task-views';

/** The runtime composition (storage, tools, permissions, model) served over HTTP and WebSocket. */
export async function bootController(
  config: AppConfig,
  options: StartOptions & { overrides?: RuntimeOverrides } = {},
): Promise<StartedApp> {
  const log = options.log ?? createLogger(config.LOG_LEVEL, options.logDestination);
  const runtimeLog = (message: string, err?: unknown) =>
    log.error({ err, task_id: /\btask_[A-Za-z0-9]+/.exec(message)?.[0] ?? null }, message);
  const built = await buildRuntime(config, {
    defaultAllowedRoot: './data/workspace',
    log: runtimeLog,
    ...options.overrides,
  });
  const sandbox = () => built.sandbox?.sandboxStatus().effective ?? null;
  const probe = built.storage ? new SqliteHealthProbe(config.RUNLEDGER_DB, sandbox) : null;
  // with an overridden store (tests) there is no SQLite file to probe: the store answering is the check
  const health = async (): Promise<HealthReport> => {
    if (probe) return probe.check();
    return built.store.head().then(
      () => ({ db: 'reachable', migrations: 'unknown', sandbox: sandbox() }),
      () => ({ db: 'unreachable', migrations: 'unknown', sandbox: sandbox() }),
    );
  };
  const backend = new RuntimeApiBackend({
    commands: built.service,
    store: built.store,
    bus: built.bus,
    tasks: built.storage
      ? new ProjectionTaskReadModel(built.storage.taskStates, built.storage.db.withTables<StateStoreTables>())
      : new LogTaskReadModel(built.store),
    health,
    close: async () => {
      probe?.close();
      await built.close();
    },
  });
  try {
    return await startApp(config, backend, {
      ...options,
      log,
      modules: [MemoryHttpModule.forRoot(built.memory?.service ?? null), ...(options.modules ?? [])],
    });
  } catch (err) {
    await backend.close();
    throw err;
  }
}
