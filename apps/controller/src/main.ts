import 'reflect-metadata';
import { scrubProviderKeys } from '@runledger/permissions';
import { startApp } from './app';
import { loadConfig, providerKeyNames } from './config';

async function main(): Promise<void> {
  const config = loadConfig();
  const started = await startApp(config);
  // the model clients hold their keys now: plugin code and child processes must not find them
  scrubProviderKeys(process.env, providerKeyNames(config));
  process.stdout.write(`runledger listening on ${started.url}\n`);
  const generated = started.generatedAdminToken;
  if (generated) {
    // like Jupyter: the address carries the token in the fragment, which the browser never sends to the server
    process.stdout.write(
      `${generated.created ? 'generated' : 'using'} admin token in ${generated.file}\n` +
        `dashboard: ${started.url}/admin#token=${encodeURIComponent(generated.token)}\n`,
    );
  }
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
