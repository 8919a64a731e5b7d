/**
 * The model name sys_util answers under. Apart from sys-util.ts so the usage
 * meter can recognise its answers without importing the backend (which imports
 * the meter's token estimate).
 */
export const SYS_UTIL = 'sys_util';
