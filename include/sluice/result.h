// Expected failures are values: Result<T> carries either a T or an Error with a code, a one-line
// message (already naming the fix where there is one) and a retriable flag. Exceptions are used
// only at start-up (config loading); the runtime never throws across a connector boundary.
#pragma once

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace sluice {

enum class Errc {
  invalid_argument,  // bad setting value or request
  config,            // pipeline file problem
  io,                // local file or socket I/O
  connection,        // cannot reach / lost a server
  auth,              // wrong credentials
  permission,        // missing privilege
  not_found,         // table, slot, topic, file missing
  unsupported,       // feature or server configuration not supported
  data,              // malformed input or a value the destination rejects
  conflict,          // resource in use (slot active, lock held)
  cancelled,         // stop requested
  timeout,
  internal,
};

std::string_view errc_name(Errc code) noexcept;

// `context` + `message`, where `context` is ": "-separated segments ("pipeline p: postgres
// destination: "): when `message` already starts with the context's last segments ("postgres
// destination: …", added by the connector itself), those are not repeated.
std::string prefix_context(std::string_view context, std::string_view message);

class [[nodiscard]] Error {
 public:
  Error(Errc code, std::string message, bool retriable = false)
      : code_(code), message_(std::move(message)), retriable_(retriable) {}

  Errc code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }
  bool retriable() const noexcept { return retriable_; }

  // Prefix context ("sqlite destination: ") keeping code and retriable; a message that already
  // starts with the context's last segments is not given them twice (see prefix_context).
  Error with_context(std::string_view context) const {
    return Error(code_, prefix_context(context, message_), retriable_);
  }

 private:
  Errc code_;
  std::string message_;
  bool retriable_;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<0>(v_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<0>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(v_));
  }
  T& operator*() & { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const& {
    assert(!ok());
    return std::get<1>(v_);
  }
  Error&& error() && {
    assert(!ok());
    return std::get<1>(std::move(v_));
  }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error)
      : error_(std::move(error)), ok_(false) {}  // NOLINT(google-explicit-constructor)

  bool ok() const noexcept { return ok_; }
  explicit operator bool() const noexcept { return ok_; }
  const Error& error() const& {
    assert(!ok_);
    return error_;
  }
  Error&& error() && {
    assert(!ok_);
    return std::move(error_);
  }

 private:
  Error error_{Errc::internal, ""};
  bool ok_ = true;
};

using Status = Result<void>;

inline Status ok_status() { return Status(); }

}  // namespace sluice

// Error propagation, the one way: SLUICE_TRY(expr) returns expr's error from the enclosing function
// (which returns a Status or any Result<T>); SLUICE_TRY_ASSIGN(lhs, expr) does the same and
// otherwise moves the value into `lhs` (a declaration such as `auto conn` or an existing variable).
#define SLUICE_TRY_CONCAT_INNER(a, b) a##b
#define SLUICE_TRY_CONCAT(a, b) SLUICE_TRY_CONCAT_INNER(a, b)
#define SLUICE_TRY(expr)                                                        \
  do {                                                                          \
    auto&& sluice_try_result_ = (expr);                                         \
    if (!sluice_try_result_.ok()) return std::move(sluice_try_result_).error(); \
  } while (0)
#define SLUICE_TRY_ASSIGN(lhs, expr) \
  SLUICE_TRY_ASSIGN_IMPL(SLUICE_TRY_CONCAT(sluice_try_result_, __LINE__), lhs, expr)
#define SLUICE_TRY_ASSIGN_IMPL(tmp, lhs, expr)  \
  auto tmp = (expr);                            \
  if (!tmp.ok()) return std::move(tmp).error(); \
  lhs = std::move(tmp).value()
