import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { STOP_REASONS } from '@runledger/contracts';
import { failDirectiveStop, stopReasonText } from './stop-reasons';

describe('stop reasons', () => {
  it('docs/api.md lists every canonical stop reason with the sentence the runtime gives it', () => {
    const doc = readFileSync(resolve(__dirname, '../../../../docs/api.md'), 'utf8');
    const missing = STOP_REASONS.filter((r) => !doc.includes(`| \`${r}\` | ${stopReasonText(r)} |`));
    expect(missing).toEqual([]);
  });

  it('a fail after a remote agent could not be used ends remote_unavailable; a denied call still comes first', () => {
    const model = { source: 'model' } as unknown as Parameters<typeof failDirectiveStop>[1];
    const remoteDown = new Map([['c1', { ended: { stop_reason: 'remote_unavailable' as const } }]]);
    const remoteFailed = new Map([['c1', { ended: { stop_reason: 'tool_error' as const } }]]);
    const denied = new Map([['t1', { error_kind: 'permission_denied' }]]);
    expect(failDirectiveStop({ calls: new Map(), children: remoteDown }, model)).toBe('remote_unavailable');
    expect(failDirectiveStop({ calls: new Map(), children: remoteFailed }, model)).toBe('model_gave_up');
    expect(failDirectiveStop({ calls: denied, children: remoteDown }, model)).toBe('permission_denied');
  });
});
