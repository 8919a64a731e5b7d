import 'reflect-metadata';
import { loadConfig } from './config';
import { startApp } from './app';

async function main(): Promise<void> {
  const config = loadConfig();
  const started = await startApp(config);
  process.stdout.write(`runledger listening on ${started.url}\n`);
  const stop = () => {
    void started.close().then(() => process.exit(0));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main().catch((e: unknown) => {
  process.stderr.write(`runledger: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});
