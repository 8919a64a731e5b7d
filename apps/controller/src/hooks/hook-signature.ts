import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { HookSignature } from './hook-config';

/** The headers a scheme reads, by name (lower case, as Node gives them). */
type Headers = Readonly<Record<string, string>>;

/**
 * Timestamped schemes sign `<t>.<raw body>` and send `t=<unix seconds>,v1=<hex HMAC-SHA256>` (several
 * v1 while a secret rotates): Runledger's own outbound deliveries and Stripe's. The rest sign the raw
 * body alone.
 */
const TIMESTAMPED: Record<string, string> = { runledger: 'runledger-signature', stripe: 'stripe-signature' };
const GITHUB_HEADER = 'x-hub-signature-256';

/** The header a scheme's signature arrives in. */
export function signatureHeaderOf(signature: HookSignature): string {
  if (typeof signature !== 'string') return signature.header;
  return signature === 'github' ? GITHUB_HEADER : TIMESTAMPED[signature];
}

/** Whether two MACs are equal, in time that does not depend on where they differ. */
function sameMac(expected: Buffer, given: Buffer): boolean {
  return expected.length === given.length && timingSafeEqual(expected, given);
}

function timestampedProblem(
  secret: string,
  raw: Buffer,
  header: string,
  nowMs: number,
  toleranceS: number,
): string | null {
  let t: number | null = null;
  const macs: Buffer[] = [];
  for (const field of header.split(',')) {
    const at = field.indexOf('=');
    const key = field.slice(0, at).trim();
    const value = field.slice(at + 1).trim();
    if (key === 't' && /^\d{1,12}$/.test(value)) t = Number(value);
    else if (key === 'v1' && /^[0-9a-f]{64}$/i.test(value)) macs.push(Buffer.from(value, 'hex'));
  }
  if (t === null || macs.length === 0) return 'signature header is not t=<unix seconds>,v1=<hex>';
  const skew = Math.abs(Math.round(nowMs / 1000) - t);
  if (skew > toleranceS)
    return `signature timestamp is ${skew} s from the server's clock (tolerance ${toleranceS} s): a replay, or a clock out of step`;
  const expected = createHmac('sha256', secret).update(`${t}.`).update(raw).digest();
  // every v1 is compared, so the time taken does not tell which one matched
  return macs.map((m) => sameMac(expected, m)).includes(true) ? null : 'signature does not match';
}

function bodyMacProblem(
  secret: string,
  raw: Buffer,
  header: string,
  o: { algorithm: string; encoding: 'hex' | 'base64'; prefix: string },
): string | null {
  if (!header.startsWith(o.prefix)) return `signature does not start with ${JSON.stringify(o.prefix)}`;
  const given = Buffer.from(header.slice(o.prefix.length).trim(), o.encoding);
  return sameMac(createHmac(o.algorithm, secret).update(raw).digest(), given)
    ? null
    : 'signature does not match';
}

/**
 * Why a delivery's signature does not verify under the hook's scheme and secret (null: it does): no
 * signature header, a malformed one, a signed time outside the tolerance, or a MAC that does not match.
 */
export function signatureProblem(
  signature: HookSignature,
  secret: string,
  raw: Buffer,
  headers: Headers,
  nowMs: number,
  toleranceS: number,
): string | null {
  const name = signatureHeaderOf(signature);
  const header = headers[name];
  if (!header) return `missing signature header ${name}`;
  if (typeof signature !== 'string') return bodyMacProblem(secret, raw, header, signature);
  if (signature === 'github')
    return bodyMacProblem(secret, raw, header, { algorithm: 'sha256', encoding: 'hex', prefix: 'sha256=' });
  return timestampedProblem(secret, raw, header, nowMs, toleranceS);
}

const DELIVERY_HEADERS: Record<string, string> = {
  runledger: 'runledger-delivery',
  github: 'x-github-delivery',
};

/** the longest delivery id taken as given; a longer one is named by its hash */
const MAX_DELIVERY_ID = 200;

export const sha256Hex = (data: Buffer | string): string => createHash('sha256').update(data).digest('hex');

/**
 * A delivery's id, which a provider repeats when it sends the delivery again: the configured header,
 * else the scheme's own (Runledger-Delivery, X-GitHub-Delivery; Stripe's event id in the body), else
 * Idempotency-Key, else the hash of the raw body (the same body twice is one delivery).
 */
export function deliveryIdOf(
  hook: { signature: HookSignature; delivery_header?: string },
  headers: Headers,
  body: unknown,
  raw: Buffer,
): string {
  const style = typeof hook.signature === 'string' ? hook.signature : null;
  const stripeId =
    style === 'stripe' && body !== null && typeof body === 'object'
      ? (body as { id?: unknown }).id
      : undefined;
  const candidates = [
    hook.delivery_header ? headers[hook.delivery_header] : undefined,
    style ? headers[DELIVERY_HEADERS[style]] : undefined,
    typeof stripeId === 'string' ? stripeId : undefined,
    headers['idempotency-key'],
  ];
  const given = candidates.find((c): c is string => typeof c === 'string' && c.trim().length > 0)?.trim();
  if (given === undefined) return `sha256:${sha256Hex(raw)}`;
  return given.length <= MAX_DELIVERY_ID ? given : `sha256:${sha256Hex(given)}`;
}
