import { createHmac } from 'node:crypto';
import { signatureOf } from '../outbound/outbox';
import { deliveryIdOf, signatureProblem } from './hook-signature';

const SECRET = 'hook-secret-0123456789';
const body = Buffer.from('{"action":"completed","id":"evt_1"}');
const NOW = 1_700_000_000_000;
const t = NOW / 1000;
const hex = (key: string, data: string | Buffer, alg = 'sha256') =>
  createHmac(alg, key).update(data).digest('hex');

describe('hook signatures', () => {
  it("runledger: the outbound deliveries' own header verifies; another secret, body or a stale time does not", () => {
    const header = signatureOf(SECRET, body.toString(), t);
    const check = (h: Record<string, string>, raw = body, now = NOW) =>
      signatureProblem('runledger', SECRET, raw, h, now, 300);
    expect(check({ 'runledger-signature': header })).toBeNull();
    expect(check({ 'runledger-signature': signatureOf('other-secret-0123456', body.toString(), t) })).toBe(
      'signature does not match',
    );
    expect(check({ 'runledger-signature': header }, Buffer.from('{"action":"x"}'))).toBe(
      'signature does not match',
    );
    expect(check({ 'runledger-signature': header }, body, NOW + 301_000)).toMatch(
      /301 s from the server's clock/,
    );
    expect(check({ 'runledger-signature': header }, body, NOW - 299_000)).toBeNull();
    expect(check({})).toBe('missing signature header runledger-signature');
    expect(check({ 'runledger-signature': 'v1=abc' })).toMatch(/not t=<unix seconds>/);
  });

  it('stripe: any of several v1 values (a secret being rotated) verifies', () => {
    const good = hex(SECRET, `${t}.${body.toString()}`);
    const stale = hex('old-secret', `${t}.${body.toString()}`);
    const h = { 'stripe-signature': `t=${t},v1=${stale},v1=${good},v0=zz` };
    expect(signatureProblem('stripe', SECRET, body, h, NOW, 300)).toBeNull();
    expect(
      signatureProblem('stripe', SECRET, body, { 'stripe-signature': `t=${t},v1=${stale}` }, NOW, 300),
    ).toBe('signature does not match');
  });

  it('github: sha256=<hex> of the raw body, no time', () => {
    const h = { 'x-hub-signature-256': `sha256=${hex(SECRET, body)}` };
    expect(signatureProblem('github', SECRET, body, h, 0, 300)).toBeNull();
    expect(
      signatureProblem('github', SECRET, body, { 'x-hub-signature-256': hex(SECRET, body) }, 0, 300),
    ).toMatch(/does not start with "sha256="/);
    expect(signatureProblem('github', SECRET, Buffer.from(' '), h, 0, 300)).toBe('signature does not match');
  });

  it('custom: the header, algorithm, encoding and prefix configured', () => {
    const sig = {
      header: 'x-shopify-hmac-sha256',
      algorithm: 'sha256' as const,
      encoding: 'base64' as const,
      prefix: '',
    };
    const mac = createHmac('sha256', SECRET).update(body).digest('base64');
    expect(signatureProblem(sig, SECRET, body, { 'x-shopify-hmac-sha256': mac }, 0, 300)).toBeNull();
    expect(signatureProblem(sig, SECRET, body, { 'x-shopify-hmac-sha256': mac.slice(1) }, 0, 300)).toBe(
      'signature does not match',
    );
    const sha1 = { header: 'x-sig', algorithm: 'sha1' as const, encoding: 'hex' as const, prefix: 'sha1=' };
    expect(
      signatureProblem(sha1, SECRET, body, { 'x-sig': `sha1=${hex(SECRET, body, 'sha1')}` }, 0, 300),
    ).toBeNull();
  });

  it("a delivery's id: the configured header, the scheme's, Stripe's event id, Idempotency-Key, else the body's hash", () => {
    const parsed = JSON.parse(body.toString()) as unknown;
    expect(deliveryIdOf({ signature: 'github' }, { 'x-github-delivery': 'gh-1' }, parsed, body)).toBe('gh-1');
    expect(deliveryIdOf({ signature: 'runledger' }, { 'runledger-delivery': 'd-1' }, parsed, body)).toBe(
      'd-1',
    );
    expect(deliveryIdOf({ signature: 'stripe' }, {}, parsed, body)).toBe('evt_1');
    expect(
      deliveryIdOf(
        { signature: 'github', delivery_header: 'x-mine' },
        { 'x-mine': 'm', 'x-github-delivery': 'g' },
        parsed,
        body,
      ),
    ).toBe('m');
    expect(deliveryIdOf({ signature: 'github' }, { 'idempotency-key': 'k-1' }, parsed, body)).toBe('k-1');
    const byBody = deliveryIdOf({ signature: 'github' }, {}, parsed, body);
    expect(byBody).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(deliveryIdOf({ signature: 'github' }, {}, parsed, Buffer.from('{}'))).not.toBe(byBody);
    expect(
      deliveryIdOf({ signature: 'github' }, { 'x-github-delivery': 'x'.repeat(300) }, parsed, body),
    ).toMatch(/^sha256:/);
  });
});
