/** Top-level folders whose recursive removal, chmod or move is a hard stop. */
export const SYSTEM_TOP = [
  '/bin',
  '/boot',
  '/dev',
  '/etc',
  '/home',
  '/lib',
  '/lib32',
  '/lib64',
  '/libx32',
  '/opt',
  '/proc',
  '/root',
  '/sbin',
  '/srv',
  '/sys',
  '/usr',
  '/var',
  '/mnt',
  '/media',
  '/run',
  '/snap',
];
/** Writing anywhere below these is a hard stop. */
export const PROTECTED_WRITE = [
  '/etc',
  '/boot',
  '/bin',
  '/sbin',
  '/lib',
  '/lib32',
  '/lib64',
  '/libx32',
  '/usr',
  '/sys',
  '/proc',
];
export const BLOCK_DEVICE =
  /^\/dev\/(sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|loop\d|dm-\d|md\d|sr\d|mapper\/|disk\/|root\b|nbd\d|ram\d|mem$|kmem$|port$)/;
export const HARMLESS_SINKS = new Set([
  '/dev/null',
  '/dev/stdout',
  '/dev/stderr',
  '/dev/tty',
  '/dev/zero',
  '/dev/full',
]);
/** Other processes' data (their environment, memory, open files): outside every allowed root. */
export const PROCESS_DATA = ['/proc', '/sys'];
