// Package batch runs files of requests in the OpenAI batch format: it reads
// the input lines, learns from an output file which custom_ids are already
// answered, sends the rest through a Doer a few at a time, and appends one
// output line per request as each finishes.
//
// Both `superfluid batch` (in-process or against a server's URL) and the
// server's /v1/batches use it, so a batch resumes the same way whether the
// CLI was killed or the server restarted: the output file is the only
// progress record, written a whole line at a time, and reopening it drops
// what cannot be trusted (a line cut short, a failure worth retrying).
// Which model answers, and over what transport, is the Doer's business.
package batch
