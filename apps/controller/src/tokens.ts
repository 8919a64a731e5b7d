/** Nest injection tokens of the controller's own providers. */
export const DATABASE = Symbol('DATABASE');
