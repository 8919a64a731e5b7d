import 'reflect-metadata';
import { startApp } from './app';
import { startupBanner } from './banner';
import { loadConfig } from './config';

async function main(): Promise<void> {
  const config = loadConfig();
  const started = await startApp(config);
  process.stderr.write(startupBanner(started));
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    void started.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main().catch((e: unknown) => {
  process.stderr.write(`runledger: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});
