import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const ROOT = resolve(__dirname, '..');
const CONFORMANCE = join(ROOT, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
const EXPECTED_FAILURES = join(__dirname, 'support/mcp-conformance-expected-failures.yml');
const CLIENT = join(__dirname, 'support/mcp-conformance-client.js');

/** The client scenarios run here: every one of the suite's that is not about OAuth. */
const RUN = ['initialize', 'tools_call', 'elicitation-sep1034-client-defaults', 'sse-retry'];

function conformance(args: string[], cwd: string): Promise<{ code: number; output: string }> {
  return new Promise((done) =>
    execFile(
      process.execPath,
      ['--import', join(__dirname, 'support/conformance-node20.mjs'), CONFORMANCE, ...args],
      { cwd, timeout: 120_000, maxBuffer: 16 * 1024 * 1024 },
      (err, stdout, stderr) =>
        done({ code: err ? Number(err.code ?? 1) : 0, output: `${stdout}\n${stderr}` }),
    ),
  );
}

const baselineClient = (): string[] => {
  const text = readFileSync(EXPECTED_FAILURES, 'utf8');
  return text
    .slice(text.indexOf('\nclient:\n'))
    .split('\n')
    .filter((line) => line.startsWith('  - '))
    .map((line) => line.slice(4).split(' ')[0]);
};

/**
 * The official MCP conformance suite's client mode against Runledger's MCP client: the suite starts
 * a server per scenario and runs test/support/mcp-conformance-client.js against it, which connects
 * with McpServerConnection as a configured HTTP server is connected and does what the scenario asks.
 */
describe('the official MCP conformance suite, client mode, against our MCP client', () => {
  let cwd: string;
  beforeAll(() => {
    cwd = mkdtempSync(join(tmpdir(), 'rl-conformance-client-'));
  });
  afterAll(() => rmSync(cwd, { recursive: true, force: true }));

  it.each(RUN)(
    '%s passes every check',
    async (scenario) => {
      const { code, output } = await conformance(
        [
          'client',
          '--command',
          `node ${CLIENT}`,
          '--scenario',
          scenario,
          '--expected-failures',
          EXPECTED_FAILURES,
        ],
        cwd,
      );
      expect({ code, results: output.match(/^Passed: .*$/m)?.[0] }).toEqual({
        code: 0,
        results: expect.stringMatching(/^Passed: (\d+)\/\1, 0 failed, 0 warnings$/),
      });
    },
    130_000,
  );

  it('every client scenario of the suite is run here or listed as an expected failure with its reason', async () => {
    const { output } = await conformance(['list'], cwd);
    const listed = [...output.slice(output.indexOf('Client scenarios')).matchAll(/^ {2}- (\S+)/gm)].map(
      (m) => m[1],
    );
    expect(listed.length).toBeGreaterThan(4);
    expect([...listed].sort()).toEqual([...RUN, ...baselineClient()].sort());
    const text = readFileSync(EXPECTED_FAILURES, 'utf8');
    for (const line of text
      .slice(text.indexOf('\nclient:\n'))
      .split('\n')
      .filter((l) => l.startsWith('  - ')))
      expect(line).toMatch(/^ {2}- [a-z0-9/-]+ # \S.{20,}$/);
  }, 60_000);
});
