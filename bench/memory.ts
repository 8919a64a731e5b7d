/**
 * npm run bench -- memory
 * The memory index at scale, in one run, for two datasets of 100k vectors, dim 384:
 *   - seeded random (Gaussian, L2-normalised): no structure, the hard case for HNSW
 *   - hashed text (HashingEmbedder over seeded synthetic sentences): what the default embedder produces
 * For each: HNSW build time (VectorIndex, the production class), query p50/p99 at k=10 for an ef
 * sweep, recall@10 against exact brute force for 200 queries, and the speed ratio to two
 * brute-force baselines measured in the same run: hnswlib's BruteforceSearch (C++) and a plain
 * Float32Array scan in JS.
 * Env: BENCH_N (100000), BENCH_QUERIES (200), BENCH_M, BENCH_EF_CONSTRUCTION (DEFAULT_HNSW), BENCH_EF ("32,64,96,<default>,256"),
 * BENCH_IID=<n> adds the worst case: n iid Gaussian vectors (no structure).
 */
import { BruteforceSearch } from 'hnswlib-node';
import { DEFAULT_HNSW, HashingEmbedder, VectorIndex, cosine } from '@runledger/memory';
import { seededRandom } from '@runledger/runtime';

const DIM = 384;
const K = 10;

function normalise(v: Float32Array): Float32Array {
  let s = 0;
  for (let i = 0; i < v.length; i++) s += v[i] * v[i];
  const n = Math.sqrt(s) || 1;
  for (let i = 0; i < v.length; i++) v[i] /= n;
  return v;
}

function gaussian(rnd: () => number): () => number {
  return () => Math.sqrt(-2 * Math.log(rnd() + 1e-12)) * Math.cos(2 * Math.PI * rnd());
}

/**
 * Seeded random vectors with the structure real embeddings have: a low
 * intrinsic dimension. Each point is a fixed random 384 x INTRINSIC projection
 * of a Gaussian latent, plus a little isotropic noise, L2-normalised. `iid`
 * is pure 384-d Gaussian noise instead: no structure, the worst case for any ANN index.
 */
const INTRINSIC = 24;
function randomVectors(n: number, seed: number, iid = false): Float32Array[] {
  const rnd = seededRandom(seed);
  const g = gaussian(rnd);
  const basis = Array.from({ length: INTRINSIC }, () => Float32Array.from({ length: DIM }, g));
  const out: Float32Array[] = [];
  for (let j = 0; j < n; j++) {
    const v = Float32Array.from({ length: DIM }, () => (iid ? 1 : 0.1) * g());
    if (!iid) {
      for (const b of basis) {
        const z = g();
        for (let i = 0; i < DIM; i++) v[i] += z * b[i];
      }
    }
    out.push(normalise(v));
  }
  return out;
}

/**
 * Hashed text: sentences from seeded topics (TOPICS topic vocabularies plus a
 * shared Zipf-distributed vocabulary), embedded with the default HashingEmbedder.
 */
const TOPICS = 500;
const VOCAB_SIZE = 5000;
function textVectors(n: number, seed: number): Float32Array[] {
  const rnd = seededRandom(seed);
  const syll = [
    'ka',
    'lo',
    'mi',
    'ne',
    'ru',
    'sa',
    'ti',
    'vo',
    'ze',
    'po',
    'qu',
    'xi',
    'da',
    'fe',
    'gu',
    'ha',
  ];
  const newWord = () =>
    Array.from({ length: 2 + Math.floor(rnd() * 3) }, () => syll[Math.floor(rnd() * syll.length)]).join('');
  const vocab = Array.from({ length: VOCAB_SIZE }, newWord);
  const topics = Array.from({ length: TOPICS }, () => Array.from({ length: 30 }, newWord));
  const embedder = new HashingEmbedder(DIM);
  const out: Float32Array[] = [];
  for (let j = 0; j < n; j++) {
    const topic = topics[Math.floor(rnd() * TOPICS)];
    const len = 6 + Math.floor(rnd() * 20);
    // Zipf-like shared words, as in real text, and the topic's own words
    const words = Array.from({ length: len }, () =>
      rnd() < 0.6
        ? topic[Math.floor(rnd() * topic.length)]
        : vocab[Math.floor(VOCAB_SIZE * Math.pow(rnd(), 2.5))],
    );
    out.push(embedder.embedOne(words.join(' ')));
  }
  return out;
}

const pct = (sorted: number[], p: number): number =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
const ms = (n: number): string => `${n.toFixed(3)} ms`;

function jsScan(data: readonly Float32Array[], q: Float32Array, k: number): number[] {
  const best: { i: number; s: number }[] = [];
  for (let i = 0; i < data.length; i++) {
    const s = cosine(q, data[i]);
    if (best.length < k || s > best[best.length - 1].s) {
      best.push({ i, s });
      best.sort((a, b) => b.s - a.s);
      if (best.length > k) best.pop();
    }
  }
  return best.map((b) => b.i);
}

function runDataset(
  name: string,
  data: Float32Array[],
  queries: Float32Array[],
  m: number,
  efC: number,
  efs: number[],
  slices: [string, number, number][],
): void {
  console.log(
    `\n== ${name}: ${data.length} vectors, dim ${DIM}, ${queries.length} queries, k=${K}, M=${m}, efConstruction=${efC}`,
  );

  let t = performance.now();
  const index = VectorIndex.create('bench', DIM, { m, efConstruction: efC, ef: efs[0] }, data.length, 0);
  for (let i = 0; i < data.length; i++) index.add(i, data[i]);
  const buildMs = performance.now() - t;
  console.log(
    `HNSW build: ${(buildMs / 1000).toFixed(1)} s (${Math.round(data.length / (buildMs / 1000))} vectors/s)`,
  );

  // What one call through the native binding costs before any search (it copies the query element by element).
  const tiny = VectorIndex.create('bench', DIM, { m, efConstruction: efC, ef: efs[0] }, 1024, 0);
  tiny.add(0, data[0]);
  const overhead: number[] = [];
  for (const q of queries) {
    t = performance.now();
    tiny.search(q, 1);
    overhead.push(performance.now() - t);
  }
  console.log(
    `binding cost per search call (1-vector index): p50 ${ms(
      pct(
        overhead.sort((a, b) => a - b),
        50,
      ),
    )}`,
  );

  // Exact ground truth and the C++ brute-force baseline.
  const brute = new BruteforceSearch('cosine', DIM);
  brute.initIndex(data.length);
  for (let i = 0; i < data.length; i++) brute.addPoint(Array.from(data[i]), i);
  const truth: Set<number>[] = [];
  const bruteTimes: number[] = [];
  for (const q of queries) {
    const arr = Array.from(q);
    t = performance.now();
    const r = brute.searchKnn(arr, K);
    bruteTimes.push(performance.now() - t);
    truth.push(new Set(r.neighbors));
  }
  bruteTimes.sort((a, b) => a - b);
  const bruteMean = bruteTimes.reduce((a, b) => a + b, 0) / bruteTimes.length;
  console.log(
    `brute force (hnswlib BruteforceSearch, C++): p50 ${ms(pct(bruteTimes, 50))}, p99 ${ms(pct(bruteTimes, 99))}, mean ${ms(bruteMean)}`,
  );

  // The plain JS scan: a second baseline, on a sample (it is slow), checked against the truth.
  const jsSample = queries.slice(0, 20);
  const jsTimes: number[] = [];
  let jsAgree = 0;
  jsSample.forEach((q, qi) => {
    t = performance.now();
    const ids = jsScan(data, q, K);
    jsTimes.push(performance.now() - t);
    jsAgree += ids.filter((i) => truth[qi].has(i)).length;
  });
  const jsMean = jsTimes.reduce((a, b) => a + b, 0) / jsTimes.length;
  const jsP50 = pct(
    [...jsTimes].sort((a, b) => a - b),
    50,
  );
  console.log(
    `brute force (JS Float32Array scan, ${jsSample.length} queries): p50 ${ms(jsP50)}, mean ${ms(jsMean)}, agrees with C++ truth on ${((jsAgree / (jsSample.length * K)) * 100).toFixed(1)}% of top-10`,
  );

  console.log(
    'speed ratio = brute-force time / HNSW time, by p50 and by mean (the mean carries the stalls of a shared machine)',
  );
  console.log(
    `ef    recall@10   p50        p99        mean       x C++ p50/mean    x JS p50/mean${slices.map(([label]) => `   recall ${label}`).join('')}`,
  );
  for (const ef of efs) {
    const times: number[] = [];
    const found: number[] = [];
    queries.forEach((q, qi) => {
      const started = performance.now();
      const res = index.search(q, K, ef);
      times.push(performance.now() - started);
      found.push(res.filter((h) => truth[qi].has(h.label)).length);
    });
    const recallOf = (from: number, to: number) =>
      found.slice(from, to).reduce((a, b) => a + b, 0) / ((to - from) * K);
    const sorted = [...times].sort((a, b) => a - b);
    const mean = times.reduce((a, b) => a + b, 0) / times.length;
    console.log(
      `${String(ef).padEnd(5)} ${recallOf(0, queries.length).toFixed(4).padEnd(11)} ${ms(pct(sorted, 50)).padEnd(10)} ${ms(pct(sorted, 99)).padEnd(10)} ${ms(mean).padEnd(10)} ${`${(pct(bruteTimes, 50) / pct(sorted, 50)).toFixed(1)} / ${(bruteMean / mean).toFixed(1)}`.padEnd(17)} ${`${(jsP50 / pct(sorted, 50)).toFixed(1)} / ${(jsMean / mean).toFixed(1)}`.padEnd(13)}${slices
        .map(
          ([label, from, to]) =>
            `   ${recallOf(from, to)
              .toFixed(4)
              .padEnd(label.length + 7)}`,
        )
        .join('')}`,
    );
  }
}

export async function main(): Promise<void> {
  const n = Number(process.env.BENCH_N ?? 100_000);
  const nq = Number(process.env.BENCH_QUERIES ?? 200);
  // the production parameters unless overridden
  const m = Number(process.env.BENCH_M ?? DEFAULT_HNSW.m);
  const efC = Number(process.env.BENCH_EF_CONSTRUCTION ?? DEFAULT_HNSW.efConstruction);
  const efs = (process.env.BENCH_EF ?? `32,64,96,${DEFAULT_HNSW.ef},256`).split(',').map(Number);
  const half = Math.floor(n / 2);
  const halfQ = Math.floor(nq / 2);

  // One 100k index holding both kinds, as one memory would: half seeded random, half hashed text.
  const t = performance.now();
  const random = randomVectors(half + halfQ, 42);
  const text = textVectors(n - half + (nq - halfQ), 7);
  console.log(
    `generated ${half + halfQ} seeded random vectors and embedded ${text.length} synthetic texts (runledger-hash-v1) in ${((performance.now() - t) / 1000).toFixed(1)} s`,
  );
  const data = [...random.slice(0, half), ...text.slice(0, n - half)];
  const queries = [...random.slice(half), ...text.slice(n - half)];
  runDataset(`seeded random (${half}) + hashed text (${n - half})`, data, queries, m, efC, efs, [
    ['seeded random queries', 0, halfQ],
    ['hashed text queries', halfQ, nq],
  ]);

  if (process.env.BENCH_IID) {
    const iid = randomVectors(Number(process.env.BENCH_IID) + nq, 43, true);
    runDataset('iid Gaussian (worst case, no structure)', iid.slice(0, -nq), iid.slice(-nq), m, efC, efs, []);
  }
}

if (require.main === module) {
  main().catch((e: unknown) => {
    console.error(e);
    process.exit(1);
  });
}
