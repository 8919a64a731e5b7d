/** Nest injection tokens of the controller's own providers. */
export const DATABASE = Symbol('DATABASE');
export const LOGGER = Symbol('LOGGER');
