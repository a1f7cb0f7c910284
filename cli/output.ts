/**
 * Aborted when stdout's reader goes away (`keel demo | head`): commands stop their work,
 * clean up and return, and `keel` exits 0 quietly. `runAsProcess` aborts it on EPIPE.
 */
export const outputClosed = new AbortController();
