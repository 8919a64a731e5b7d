/** Nest injection tokens of the controller's own providers. */
export const LOGGER = Symbol('LOGGER');
