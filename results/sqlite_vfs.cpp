// A VFS that forwards every call to the default one ("unix" on Linux) and records the
// errno of the file operations that fail; see sqlite_vfs.hpp for why.
#include "results/sqlite_vfs.hpp"

#include <sqlite3.h>

#include <cerrno>
#include <mutex>
#include <stdexcept>

namespace clustersim::results {
namespace {

thread_local int io_errno = 0;

// After a failed call of the real file: the unix VFS keeps the errno of a failed
// system call in the file (SQLITE_FCNTL_LAST_ERRNO), except for a full disk, which it
// reports as SQLITE_FULL with that errno cleared; errno itself still holds it then.
void record(sqlite3_file* real, int rc, int saved_errno) {
  if (rc == SQLITE_OK) return;
  int e = 0;
  if (real->pMethods && real->pMethods->xFileControl(real, SQLITE_FCNTL_LAST_ERRNO, &e) != SQLITE_OK) e = 0;
  io_errno = e != 0 ? e : saved_errno;
}

struct File {
  sqlite3_file base;
  sqlite3_file* real;  // the real VFS's file, allocated right after this struct
};

sqlite3_file* real_of(sqlite3_file* f) { return reinterpret_cast<File*>(f)->real; }

// Calls a method of the real file, recording the errno if it fails.
template <class Method, class... Args>
int recorded(sqlite3_file* f, Method method, Args... args) {
  sqlite3_file* r = real_of(f);
  errno = 0;
  const int rc = (r->pMethods->*method)(r, args...);
  record(r, rc, errno);
  return rc;
}
template <class Method, class... Args>
int forwarded(sqlite3_file* f, Method method, Args... args) {
  sqlite3_file* r = real_of(f);
  return (r->pMethods->*method)(r, args...);
}

int x_close(sqlite3_file* f) { return forwarded(f, &sqlite3_io_methods::xClose); }
int x_read(sqlite3_file* f, void* p, int n, sqlite3_int64 off) { return forwarded(f, &sqlite3_io_methods::xRead, p, n, off); }
int x_write(sqlite3_file* f, const void* p, int n, sqlite3_int64 off) {
  return recorded(f, &sqlite3_io_methods::xWrite, p, n, off);
}
int x_truncate(sqlite3_file* f, sqlite3_int64 size) { return recorded(f, &sqlite3_io_methods::xTruncate, size); }
int x_sync(sqlite3_file* f, int flags) { return recorded(f, &sqlite3_io_methods::xSync, flags); }
int x_file_size(sqlite3_file* f, sqlite3_int64* size) { return forwarded(f, &sqlite3_io_methods::xFileSize, size); }
int x_lock(sqlite3_file* f, int level) { return forwarded(f, &sqlite3_io_methods::xLock, level); }
int x_unlock(sqlite3_file* f, int level) { return forwarded(f, &sqlite3_io_methods::xUnlock, level); }
int x_check_reserved_lock(sqlite3_file* f, int* out) {
  return forwarded(f, &sqlite3_io_methods::xCheckReservedLock, out);
}
// SQLITE_FCNTL_SIZE_HINT grows the file (a checkpoint's ftruncate or fallocate): a
// failure there is a failed write too.
int x_file_control(sqlite3_file* f, int op, void* arg) {
  return op == SQLITE_FCNTL_SIZE_HINT ? recorded(f, &sqlite3_io_methods::xFileControl, op, arg)
                                      : forwarded(f, &sqlite3_io_methods::xFileControl, op, arg);
}
int x_sector_size(sqlite3_file* f) { return forwarded(f, &sqlite3_io_methods::xSectorSize); }
int x_device_characteristics(sqlite3_file* f) { return forwarded(f, &sqlite3_io_methods::xDeviceCharacteristics); }
int x_shm_map(sqlite3_file* f, int page, int size, int extend, void volatile** p) {
  return recorded(f, &sqlite3_io_methods::xShmMap, page, size, extend, p);
}
int x_shm_lock(sqlite3_file* f, int offset, int n, int flags) {
  return forwarded(f, &sqlite3_io_methods::xShmLock, offset, n, flags);
}
void x_shm_barrier(sqlite3_file* f) {
  sqlite3_file* r = real_of(f);
  r->pMethods->xShmBarrier(r);
}
int x_shm_unmap(sqlite3_file* f, int delete_flag) { return forwarded(f, &sqlite3_io_methods::xShmUnmap, delete_flag); }
int x_fetch(sqlite3_file* f, sqlite3_int64 off, int n, void** pp) { return forwarded(f, &sqlite3_io_methods::xFetch, off, n, pp); }
int x_unfetch(sqlite3_file* f, sqlite3_int64 off, void* p) { return forwarded(f, &sqlite3_io_methods::xUnfetch, off, p); }

// Version 3, as the unix VFS's own files; a real file of an older version (none on
// Linux) is refused at open rather than called through a missing method.
const sqlite3_io_methods file_methods = {
    3,         x_close,        x_read,         x_write,       x_truncate,   x_sync,
    x_file_size, x_lock,       x_unlock,       x_check_reserved_lock,       x_file_control,
    x_sector_size, x_device_characteristics,   x_shm_map,     x_shm_lock,   x_shm_barrier,
    x_shm_unmap, x_fetch,      x_unfetch};

sqlite3_vfs* real_vfs = nullptr;
sqlite3_vfs vfs{};

int v_open(sqlite3_vfs*, sqlite3_filename name, sqlite3_file* f, int flags, int* out_flags) {
  auto* file = reinterpret_cast<File*>(f);
  file->base.pMethods = nullptr;
  file->real = reinterpret_cast<sqlite3_file*>(file + 1);
  errno = 0;
  const int rc = real_vfs->xOpen(real_vfs, name, file->real, flags, out_flags);
  if (rc != SQLITE_OK) {
    io_errno = errno;
    // SQLite calls xClose on a failed open only if pMethods is set: close the real
    // file here if its VFS left one open.
    if (file->real->pMethods) file->real->pMethods->xClose(file->real);
    return rc;
  }
  if (file->real->pMethods->iVersion < 3) {
    file->real->pMethods->xClose(file->real);
    return SQLITE_CANTOPEN;
  }
  file->base.pMethods = &file_methods;
  return SQLITE_OK;
}
int v_delete(sqlite3_vfs*, const char* name, int sync_dir) { return real_vfs->xDelete(real_vfs, name, sync_dir); }
int v_access(sqlite3_vfs*, const char* name, int flags, int* out) { return real_vfs->xAccess(real_vfs, name, flags, out); }
int v_full_pathname(sqlite3_vfs*, const char* name, int n, char* out) {
  return real_vfs->xFullPathname(real_vfs, name, n, out);
}
void* v_dl_open(sqlite3_vfs*, const char* name) { return real_vfs->xDlOpen(real_vfs, name); }
void v_dl_error(sqlite3_vfs*, int n, char* out) { real_vfs->xDlError(real_vfs, n, out); }
void (*v_dl_sym(sqlite3_vfs*, void* handle, const char* sym))(void) { return real_vfs->xDlSym(real_vfs, handle, sym); }
void v_dl_close(sqlite3_vfs*, void* handle) { real_vfs->xDlClose(real_vfs, handle); }
int v_randomness(sqlite3_vfs*, int n, char* out) { return real_vfs->xRandomness(real_vfs, n, out); }
int v_sleep(sqlite3_vfs*, int us) { return real_vfs->xSleep(real_vfs, us); }
int v_current_time(sqlite3_vfs*, double* t) { return real_vfs->xCurrentTime(real_vfs, t); }
// What sqlite3_system_errno() reports: the recorded errno of the failed operation where
// there is one, not whatever the rollback left in errno.
int v_get_last_error(sqlite3_vfs*, int n, char* out) {
  return io_errno != 0 ? io_errno : real_vfs->xGetLastError(real_vfs, n, out);
}
int v_current_time_int64(sqlite3_vfs*, sqlite3_int64* t) { return real_vfs->xCurrentTimeInt64(real_vfs, t); }
int v_set_system_call(sqlite3_vfs*, const char* name, sqlite3_syscall_ptr p) {
  return real_vfs->xSetSystemCall(real_vfs, name, p);
}
sqlite3_syscall_ptr v_get_system_call(sqlite3_vfs*, const char* name) { return real_vfs->xGetSystemCall(real_vfs, name); }
const char* v_next_system_call(sqlite3_vfs*, const char* name) { return real_vfs->xNextSystemCall(real_vfs, name); }

}  // namespace

const char* errno_recording_vfs() {
  static std::once_flag once;
  std::call_once(once, [] {
    real_vfs = sqlite3_vfs_find(nullptr);
    if (!real_vfs || real_vfs->iVersion < 3) throw std::runtime_error("SQLite: no default VFS of version 3");
    vfs.iVersion = 3;
    vfs.szOsFile = static_cast<int>(sizeof(File)) + real_vfs->szOsFile;
    vfs.mxPathname = real_vfs->mxPathname;
    vfs.zName = "clustersim-errno";
    vfs.xOpen = v_open;
    vfs.xDelete = v_delete;
    vfs.xAccess = v_access;
    vfs.xFullPathname = v_full_pathname;
    vfs.xDlOpen = real_vfs->xDlOpen ? v_dl_open : nullptr;
    vfs.xDlError = real_vfs->xDlError ? v_dl_error : nullptr;
    vfs.xDlSym = real_vfs->xDlSym ? v_dl_sym : nullptr;
    vfs.xDlClose = real_vfs->xDlClose ? v_dl_close : nullptr;
    vfs.xRandomness = v_randomness;
    vfs.xSleep = v_sleep;
    vfs.xCurrentTime = v_current_time;
    vfs.xGetLastError = v_get_last_error;
    vfs.xCurrentTimeInt64 = v_current_time_int64;
    vfs.xSetSystemCall = v_set_system_call;
    vfs.xGetSystemCall = v_get_system_call;
    vfs.xNextSystemCall = v_next_system_call;
    const int rc = sqlite3_vfs_register(&vfs, 0);
    if (rc != SQLITE_OK) throw std::runtime_error(std::string("SQLite: cannot register the VFS: ") + sqlite3_errstr(rc));
  });
  return vfs.zName;
}

int last_io_errno() noexcept { return io_errno; }
void clear_io_errno() noexcept { io_errno = 0; }

}  // namespace clustersim::results
