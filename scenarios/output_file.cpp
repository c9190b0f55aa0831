// Checked output files: the errno of the failing step goes into the message.
#include "scenarios/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>

#include "scenarios/diagnostics.hpp"

namespace clustersim {
namespace {
[[noreturn]] void fail(const std::string& file, int err) {
  throw InputError(file, "", fmt::format("cannot write the file: {}", err != 0 ? std::strerror(err) : "write failed"));
}

void require_name(const std::string& file) {
  if (file.empty()) throw InputError("<command line>", "", "an output file name is empty");
}
}  // namespace

void check_writable(const std::string& file) {
  require_name(file);
  struct stat st {};
  const bool existed = ::stat(file.c_str(), &st) == 0;
  if (existed && S_ISDIR(st.st_mode)) throw InputError(file, "", "cannot write the file: it is a folder");
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
  if (fd < 0) fail(file, errno);
  ::close(fd);
  if (!existed) ::unlink(file.c_str());
}

void write_text_file(const std::string& file, std::string_view text) {
  OutputFile out(file);
  out << text;
  out.close();
}

OutputFile::OutputFile(std::string file) : file_(std::move(file)) {
  require_name(file_);
  f_ = std::fopen(file_.c_str(), "wb");
  if (!f_) fail(file_, errno);
}

OutputFile::~OutputFile() {
  if (f_) std::fclose(f_);
}

OutputFile& OutputFile::operator<<(std::string_view text) {
  if (f_ && error_ == 0 && !text.empty() && std::fwrite(text.data(), 1, text.size(), f_) != text.size())
    error_ = errno != 0 ? errno : EIO;
  return *this;
}

void OutputFile::close() {
  if (!f_) return;
  if (error_ == 0 && std::fflush(f_) != 0) error_ = errno != 0 ? errno : EIO;
  const int closed = std::fclose(f_);
  f_ = nullptr;
  if (error_ == 0 && closed != 0) error_ = errno != 0 ? errno : EIO;
  if (error_ != 0) fail(file_, error_);
}

}  // namespace clustersim
