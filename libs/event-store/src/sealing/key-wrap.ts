import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';

const IV_BYTES = 12;
const TAG_BYTES = 16;

/** A key store that cannot be opened with the key-encryption key given (or without one). */
export class KeyWrapError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/**
 * The key-encryption key (RUNLEDGER_ERASURE_KEY_FILE): each data key is stored wrapped by it with
 * AES-256-GCM (random IV, the key id as AAD), so whoever reads the key store without it reads no
 * data key. `id` names it in the store (an HMAC of a fixed label, not the key), so a store refuses a
 * wrong key at once instead of reading every payload as key-missing.
 */
export class KeyWrap {
  readonly id: string;

  constructor(private readonly kek: Buffer) {
    if (kek.length !== 32) throw new KeyWrapError(`a key-encryption key is 32 bytes, got ${kek.length}`);
    this.id = createHmac('sha256', kek).update('runledger key-encryption key id').digest('hex').slice(0, 16);
  }

  wrap(key: Buffer, keyId: string): Buffer {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.kek, iv);
    cipher.setAAD(Buffer.from(keyId));
    const body = Buffer.concat([cipher.update(key), cipher.final()]);
    return Buffer.concat([iv, cipher.getAuthTag(), body]);
  }

  unwrap(stored: Buffer, keyId: string): Buffer {
    const decipher = createDecipheriv('aes-256-gcm', this.kek, stored.subarray(0, IV_BYTES));
    decipher.setAAD(Buffer.from(keyId));
    decipher.setAuthTag(stored.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
    try {
      return Buffer.concat([decipher.update(stored.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]);
    } catch {
      throw new KeyWrapError(`data key ${keyId} does not unwrap with the key-encryption key ${this.id}`);
    }
  }
}

/**
 * The key-encryption key in `path`: 32 bytes, raw or as base64 text (`openssl rand -base64 32`).
 * Throws KeyWrapError saying what is wrong with the file.
 */
export function readKeyEncryptionKey(path: string): Buffer {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (err) {
    throw new KeyWrapError(`RUNLEDGER_ERASURE_KEY_FILE ${path} cannot be read: ${(err as Error).message}`);
  }
  if (bytes.length === 32) return bytes;
  const text = bytes.toString('utf8').trim();
  const decoded = /^[A-Za-z0-9+/]{43}=$/.test(text) ? Buffer.from(text, 'base64') : null;
  if (decoded?.length === 32) return decoded;
  throw new KeyWrapError(
    `RUNLEDGER_ERASURE_KEY_FILE ${path} must hold 32 bytes, raw or base64 (openssl rand -base64 32); it holds ${bytes.length} bytes`,
  );
}

/**
 * Whether a key store marked `storedId` (null: its keys are raw) opens with `wrap` (null: no
 * key-encryption key configured). A store without a mark takes one: its keys are wrapped then.
 */
export function checkKeyWrap(storedId: string | null, wrap: KeyWrap | null, store: string): void {
  if (storedId === null) return;
  if (!wrap)
    throw new KeyWrapError(
      `the data keys in ${store} are wrapped by a key-encryption key (${storedId}): set RUNLEDGER_ERASURE_KEY_FILE to its file`,
    );
  if (wrap.id !== storedId)
    throw new KeyWrapError(
      `the data keys in ${store} are wrapped by the key-encryption key ${storedId}, not by RUNLEDGER_ERASURE_KEY_FILE's (${wrap.id})`,
    );
}
