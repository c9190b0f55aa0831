// The errno of a failed database write, kept for the error message. Internal to
// results/ (store.cpp opens every connection through this VFS).
//
// SQLite's sqlite3_system_errno() is the unix VFS's xGetLastError, i.e. the global
// errno when the failure reaches the connection: after the failed transaction has been
// rolled back and the locks released, whose own system calls may have replaced it. A
// commit that failed appending to a large WAL (or in a checkpoint) under a file-size
// limit then said a bare "disk I/O error". This VFS wraps the default one and records
// the errno of the write, truncate, sync or shared-memory map that failed, on the
// failing thread, as it happens.
#pragma once

namespace clustersim::results {

// Registers the wrapping VFS once (not as the default) and returns its name for
// sqlite3_open_v2.
const char* errno_recording_vfs();

// The errno of the last failed write, truncate, sync or shared-memory map on this
// thread since clear_io_errno(), 0 if none.
int last_io_errno() noexcept;
void clear_io_errno() noexcept;

}  // namespace clustersim::results
