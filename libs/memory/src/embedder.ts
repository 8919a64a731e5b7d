import type OpenAI from 'openai';
import { l2Normalise } from './vector-math';

export { cosine, l2Normalise } from './vector-math';

/** Turns texts into vectors. Every entry records `model` and `dim`, so a change of embedder is detected. */
export abstract class Embedder {
  abstract readonly model: string;
  abstract readonly dim: number;
  /** one L2-normalised vector per text, in order */
  abstract embed(texts: readonly string[]): Promise<Float32Array[]>;
}

/** FNV-1a, 32 bit: fast, stable across runs and platforms. */
function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

const WORD = /[\p{L}\p{N}]+/gu;

/**
 * The embedded default: needs no model. Feature hashing (the signed "hashing
 * trick") of words, word bigrams and character trigrams into `dim` buckets,
 * L2-normalised. Lexical, not semantic: texts that share words and spellings
 * land close; paraphrases with no shared words do not. Named honestly.
 */
export class HashingEmbedder extends Embedder {
  readonly model = 'runledger-hash-v1';

  constructor(readonly dim = 384) {
    super();
  }

  async embed(texts: readonly string[]): Promise<Float32Array[]> {
    return texts.map((t) => this.embedOne(t));
  }

  embedOne(text: string): Float32Array {
    const v = new Float32Array(this.dim);
    const add = (feature: string, weight: number) => {
      const h = fnv1a(feature);
      // The top bit picks the sign, so collisions cancel out on average instead of piling up.
      v[h % this.dim] += h & 0x80000000 ? -weight : weight;
    };
    const words = text.toLowerCase().match(WORD) ?? [];
    // A text without words still gets a unit vector: cosine over a zero vector is undefined (NaN in the index).
    if (words.length === 0) add('e:', 1);
    for (let i = 0; i < words.length; i++) {
      const w = words[i];
      add(`w:${w}`, 1);
      if (i + 1 < words.length) add(`b:${w} ${words[i + 1]}`, 0.5);
      const padded = `<${w}>`;
      for (let j = 0; j + 3 <= padded.length; j++) add(`c:${padded.slice(j, j + 3)}`, 0.3);
    }
    return l2Normalise(v);
  }
}

export interface OpenAIEmbedderOptions {
  baseURL: string;
  apiKey?: string;
  model: string;
  /** the vector size the server returns (and, for models that support it, is asked for) */
  dim: number;
  batchSize?: number;
  timeoutMs?: number;
  /** send `dimensions` in the request (text-embedding-3 models); off for servers that reject it */
  requestDimensions?: boolean;
}

/** Any OpenAI-compatible `/embeddings` endpoint, batched. */
export class OpenAIEmbedder extends Embedder {
  readonly model: string;
  readonly dim: number;
  private readonly client: OpenAI;

  constructor(private readonly options: OpenAIEmbedderOptions) {
    super();
    this.model = options.model;
    this.dim = options.dim;
    // required here: a process whose memory uses no OpenAI-compatible embedder does not load the client
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    this.client = new (require('openai') as typeof import('openai')).OpenAI({
      baseURL: options.baseURL,
      apiKey: options.apiKey || 'unused',
      timeout: options.timeoutMs ?? 30_000,
      maxRetries: 1,
    });
  }

  async embed(texts: readonly string[]): Promise<Float32Array[]> {
    const size = this.options.batchSize ?? 64;
    const out: Float32Array[] = [];
    for (let i = 0; i < texts.length; i += size) {
      const batch = texts.slice(i, i + size);
      const res = await this.client.embeddings.create({
        model: this.model,
        input: batch,
        encoding_format: 'float',
        ...(this.options.requestDimensions ? { dimensions: this.dim } : {}),
      });
      const rows = [...res.data].sort((a, b) => a.index - b.index);
      if (rows.length !== batch.length)
        throw new Error(`embeddings: asked for ${batch.length} vectors, got ${rows.length}`);
      for (const row of rows) {
        if (row.embedding.length !== this.dim)
          throw new Error(
            `embeddings: model ${this.model} returned dim ${row.embedding.length}, configured ${this.dim}`,
          );
        out.push(l2Normalise(Float32Array.from(row.embedding)));
      }
    }
    return out;
  }
}
