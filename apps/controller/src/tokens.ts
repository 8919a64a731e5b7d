/** Nest injection tokens of the controller's own providers. */
export const LOGGER = Symbol('LOGGER');
/** where the fallback providers' api_key_env variables are read (process.env unless a test passes its own) */
export const PROCESS_ENV = Symbol('PROCESS_ENV');
/** the folder tools may touch: RUNLEDGER_ALLOWED_ROOT, or the entry point's default; created at boot */
export const ALLOWED_ROOT = Symbol('ALLOWED_ROOT');
