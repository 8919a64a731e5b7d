import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkElicitationContent, secretFieldOf } from './elicitation';
import { McpBlobStore, toToolOutcome } from './mcp-results';
import { registryToolName } from './mcp-server-connection';

describe('MCP results as tool outcomes', () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'rl-mcp-blobs-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));
  const png = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');

  it('text alone stays text; an error is ok:false with its text', () => {
    const blobs = new McpBlobStore(dir);
    expect(
      toToolOutcome(
        {
          content: [
            { type: 'text', text: 'a' },
            { type: 'text', text: 'b' },
          ],
        },
        blobs,
      ),
    ).toEqual({
      ok: true,
      output: 'a\nb',
      error: null,
    });
    expect(
      toToolOutcome({ content: [{ type: 'text', text: 'no such repo' }], isError: true }, blobs),
    ).toEqual({
      ok: false,
      output: 'no such repo',
      error: 'no such repo',
    });
  });

  it('structured content is kept beside the text', () => {
    const out = toToolOutcome(
      { content: [{ type: 'text', text: '{"n":3}' }], structuredContent: { n: 3 } },
      new McpBlobStore(dir),
    );
    expect(out.output).toEqual({ text: '{"n":3}', structured_content: { n: 3 } });
  });

  it('images, audio and binary resources go to files named by their hash, described and never inlined', () => {
    const data = png.toString('base64');
    const out = toToolOutcome(
      {
        content: [
          { type: 'image', data, mimeType: 'image/png' },
          { type: 'image', data, mimeType: 'image/png' },
          { type: 'audio', data: Buffer.from('RIFF').toString('base64'), mimeType: 'audio/wav' },
          {
            type: 'resource',
            resource: {
              uri: 'file:///x.gz',
              blob: Buffer.from('gz').toString('base64'),
              mimeType: 'application/gzip',
            },
          },
          { type: 'resource', resource: { uri: 'file:///notes.txt', text: 'notes' } },
          { type: 'resource_link', uri: 'file:///big.bin', name: 'big' },
        ],
      },
      new McpBlobStore(dir),
    );
    const output = out.output as {
      text: string;
      attachments: Array<{ type: string; file: string; bytes: number }>;
    };
    expect(JSON.stringify(out)).not.toContain(data);
    expect(output.attachments.map((a) => [a.type, a.bytes])).toEqual([
      ['image', png.length],
      ['image', png.length],
      ['audio', 4],
      ['resource', 2],
    ]);
    // the same bytes are one file
    expect(readdirSync(dir).sort()).toEqual(
      [output.attachments[0].file, output.attachments[2].file, output.attachments[3].file]
        .map((f) => f.slice(dir.length + 1))
        .sort(),
    );
    expect(output.attachments[0].file).toMatch(/\/[0-9a-f]{64}\.png$/);
    expect(readFileSync(output.attachments[0].file)).toEqual(png);
    expect(output.text.split('\n')).toEqual([
      `[image image/png, ${png.length} bytes, stored at ${output.attachments[0].file}; not shown]`,
      `[image image/png, ${png.length} bytes, stored at ${output.attachments[0].file}; not shown]`,
      `[audio audio/wav, 4 bytes, stored at ${output.attachments[2].file}; not shown]`,
      `[resource application/gzip, 2 bytes (file:///x.gz), stored at ${output.attachments[3].file}; not shown]`,
      '[resource file:///notes.txt]',
      'notes',
      '[resource link file:///big.bin (big)]',
    ]);
  });
});

describe('registry names of MCP tools', () => {
  it('prefix the server, replace what a function name cannot hold, and stay within 64 characters apart', () => {
    expect(registryToolName('gh', 'search_issues')).toBe('mcp__gh__search_issues');
    expect(registryToolName('fs', 'read.file')).toBe('mcp__fs__read_file');
    const a = registryToolName('server', 'x'.repeat(80));
    const b = registryToolName('server', `${'x'.repeat(79)}y`);
    expect([a.length, b.length]).toEqual([64, 64]);
    expect(a).not.toBe(b);
  });
});

describe('elicitation forms', () => {
  it('a single string field named like a secret is asked as a secret; anything else is a form', () => {
    expect(secretFieldOf({ type: 'object', properties: { api_key: { type: 'string' } } })).toBe('api_key');
    expect(
      secretFieldOf({ type: 'object', properties: { value: { type: 'string', title: 'Password' } } }),
    ).toBe('value');
    expect(secretFieldOf({ type: 'object', properties: { name: { type: 'string' } } })).toBeNull();
    expect(
      secretFieldOf({ type: 'object', properties: { token: { type: 'string' }, user: { type: 'string' } } }),
    ).toBeNull();
  });

  it('content is checked against the form, with its defaults filled in', () => {
    const schema = {
      type: 'object',
      properties: {
        name: { type: 'string' },
        n: { type: 'integer', default: 3 },
        color: { type: 'string', enum: ['red'] },
      },
      required: ['name'],
    };
    expect(checkElicitationContent(schema, { name: 'a' })).toEqual({
      ok: true,
      content: { name: 'a', n: 3 },
    });
    expect(checkElicitationContent(schema, { name: 'a', color: 'blue' })).toEqual({
      ok: false,
      problem: '/color must be equal to one of the allowed values',
    });
  });
});
