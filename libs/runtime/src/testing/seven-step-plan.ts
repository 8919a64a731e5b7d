/**
 * The 7-step task of the benchmarks and the commit-count tests: a plan of seven
 * chained `echo` tool steps (each depends on the one before), as the
 * orchestrator's first answer.
 */
export const SEVEN_STEP_PLAN = JSON.stringify({
  type: 'plan',
  steps: Array.from({ length: 7 }, (_, i) => ({
    id: `s${i}`,
    kind: 'tool',
    tool: 'echo',
    args: { text: `step ${i}` },
    depends_on: i === 0 ? [] : [`s${i - 1}`],
  })),
});
