/** The CLI's exit codes: 0 completed, 1 ended otherwise, 2 bad usage, 3 waiting for a person. */
export const EXIT = { completed: 0, ended: 1, usage: 2, waiting: 3 } as const;
