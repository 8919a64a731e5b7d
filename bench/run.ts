/**
 * npm run bench [-- <name> [more names]]
 * Each benchmark module exports main(); it prints what it measured and the
 * ratio to a baseline measured in the same run. Without names: the headline
 * figures (HEADLINE; submit against the build unless BENCH_SUBMIT_CONTROLLER says
 * otherwise), then a table of each with its ratio and target.
 */
import { printFigures } from './bench-support';

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
  shipped: () => import('./shipped'),
  retention: () => import('./retention'),
  erasure: () => import('./erasure'),
};

/** the service as shipped against its peers and raw stores, then the figures that must hold */
const HEADLINE = ['shipped', 'replay', 'rounds', 'submit'];

async function run(): Promise<void> {
  const asked = process.argv.slice(2);
  const names = asked.length > 0 ? asked : HEADLINE;
  const unknown = names.filter((n) => !(n in BENCHES));
  if (unknown.length > 0) {
    console.error(`unknown benchmark: ${unknown.join(', ')}`);
    console.error(`usage: npm run bench [-- <${Object.keys(BENCHES).join('|')}>]`);
    process.exit(2);
  }
  // the headline's POST /tasks p99 is of the service as shipped: the build, not the sources
  if (asked.length === 0) process.env.BENCH_SUBMIT_CONTROLLER ??= 'build';
  for (const name of names) {
    console.log(`\n== bench ${name} ==`);
    await (await BENCHES[name]()).main();
  }
  printFigures();
}

run().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
