/**
 * Vector arithmetic with no dependencies, so the index-build worker can load it without an
 * embedder's client library.
 */

/** Scales `v` to length 1 in place (a zero vector stays zero) and returns it. */
export function l2Normalise(v: Float32Array): Float32Array {
  let sum = 0;
  for (let i = 0; i < v.length; i++) sum += v[i] * v[i];
  const norm = Math.sqrt(sum);
  if (norm > 0) for (let i = 0; i < v.length; i++) v[i] /= norm;
  return v;
}

/**
 * The cosine of two unit vectors (every embedder's output is one): their dot product, summed four
 * ways at once, which about halves the cost of a 384-dimension scan.
 */
export const cosine = (a: Float32Array, b: Float32Array): number => {
  let s0 = 0;
  let s1 = 0;
  let s2 = 0;
  let s3 = 0;
  const whole = a.length - (a.length % 4);
  for (let i = 0; i < whole; i += 4) {
    s0 += a[i] * b[i];
    s1 += a[i + 1] * b[i + 1];
    s2 += a[i + 2] * b[i + 2];
    s3 += a[i + 3] * b[i + 3];
  }
  for (let i = whole; i < a.length; i++) s0 += a[i] * b[i];
  return s0 + s1 + s2 + s3;
};
