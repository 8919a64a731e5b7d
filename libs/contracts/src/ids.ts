import { createHash, randomUUID } from 'node:crypto';

/**
 * A new id: the prefix, then 32 hex digits: the time in ms (12 digits), then 80 random bits (the
 * random digits of a v4 UUID, leaving out its version and variant). Ids made later sort later, as
 * UUIDv7's do, so the log's indexes on them grow at their end: a group commit of new events touches
 * a few index pages, not one page per event.
 */
export function newId(prefix: string): string {
  const random = randomUUID();
  return `${prefix}_${Date.now().toString(16).padStart(12, '0')}${random.slice(0, 8)}${random.slice(24)}`;
}

/** Stable JSON: keys sorted at every level, so equal values hash equally. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value && typeof value === 'object') {
    const obj = value as Record<string, unknown>;
    return Object.fromEntries(
      Object.keys(obj)
        .sort()
        .filter((k) => obj[k] !== undefined)
        .map((k) => [k, sortKeys(obj[k])]),
    );
  }
  return value;
}

export const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');
export const hashArgs = (tool: string, args: unknown): string => sha256(canonicalJson({ tool, args }));
