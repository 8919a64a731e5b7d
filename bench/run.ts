/**
 * npm run bench -- <name> [more names]
 * Each benchmark module exports main(); it prints what it measured and the
 * ratio to a baseline measured in the same run.
 */
const BENCHES: Record<string, () => Promise<{ main: () => Promise<void> }>> = {
  'event-store': () => import('./event-store'),
  memory: () => import('./memory'),
  api: () => import('./api'),
  submit: () => import('./submit'),
  tools: () => import('./tools'),
  runtime: () => import('./runtime'),
  rounds: () => import('./rounds'),
  replay: () => import('./replay'),
  langgraph: () => import('./langgraph'),
};

async function run(): Promise<void> {
  const names = process.argv.slice(2);
  const unknown = names.filter((n) => !(n in BENCHES));
  if (names.length === 0 || unknown.length > 0) {
    if (unknown.length > 0) console.error(`unknown benchmark: ${unknown.join(', ')}`);
    console.error(`usage: npm run bench -- <${Object.keys(BENCHES).join('|')}>`);
    process.exit(2);
  }
  for (const name of names) {
    console.log(`\n== bench ${name} ==`);
    await (await BENCHES[name]()).main();
  }
}

run().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
