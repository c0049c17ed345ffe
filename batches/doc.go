// Package batches is the server's side of OpenAI's batch API: the File and
// Batch objects of /v1/files and /v1/batches, persisted under a directory,
// and one worker that runs the batches one at a time, oldest first, through
// a batch.Doer (the server answering each request through the request
// core, Server.AnswerBatch, in the background class).
//
// Layout under the directory:
//
//	LOCK                      held while a Store is open (one server per directory)
//	files/<id>                a file's content
//	files/<id>.json           its File object
//	batches/<id>.json         a Batch object, rewritten on every change
//	batches/<id>.results.jsonl  the batch's progress: a batch.Output
//
// Every file is written to a temporary name, synced and renamed, content
// before metadata, so a crash never leaves an object that points at
// nothing. The results file is the only record of progress: a batch that
// was running when the server stopped is queued again by Open and resumes
// where that file stops (batch.OpenOutput drops a cut-short line and the
// failures worth retrying; the Runner skips what is answered). When a batch
// ends, its results are split into an output file (2xx answers) and an
// error file (everything else), both ordered as the input was, and the
// results file is removed.
//
// The package knows neither HTTP nor the engine: the http package maps its
// errors (ErrNotFound, *InvalidError, ErrClosed) to status codes, and the
// app gives Start the Doer once the model is loaded.
package batches
