#pragma once

#include <coroutine>
#include <exception>
#include <optional>
#include <utility>

namespace tandem::router::async {

// A lazily started coroutine that one caller awaits: `co_await task` starts it and resumes the
// caller with its result when it finishes (symmetric transfer, so chains of awaits do not grow
// the stack). Errors travel as absl::Status values, never as exceptions: an escaping exception
// terminates.
template <typename T>
class [[nodiscard]] Task;

namespace internal {

struct FinalAwaiter {
  bool await_ready() noexcept { return false; }
  template <typename Promise>
  std::coroutine_handle<> await_suspend(std::coroutine_handle<Promise> done) noexcept {
    std::coroutine_handle<> next = done.promise().continuation;
    return next ? next : std::noop_coroutine();
  }
  void await_resume() noexcept {}
};

struct PromiseBase {
  std::coroutine_handle<> continuation;
  std::suspend_always initial_suspend() noexcept { return {}; }
  FinalAwaiter final_suspend() noexcept { return {}; }
  void unhandled_exception() noexcept { std::terminate(); }
};

}  // namespace internal

namespace internal {

// The coroutine handle a Task owns, and how a caller awaits it.
template <typename Promise>
class TaskBase {
 public:
  TaskBase(TaskBase&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  TaskBase& operator=(TaskBase&& other) noexcept {
    if (this != &other) {
      if (handle_) handle_.destroy();
      handle_ = std::exchange(other.handle_, {});
    }
    return *this;
  }
  ~TaskBase() {
    if (handle_) handle_.destroy();
  }

  bool await_ready() const noexcept { return false; }
  std::coroutine_handle<> await_suspend(std::coroutine_handle<> caller) noexcept {
    handle_.promise().continuation = caller;
    return handle_;
  }

 protected:
  explicit TaskBase(std::coroutine_handle<Promise> handle) : handle_(handle) {}
  std::coroutine_handle<Promise> handle_;
};

template <typename T>
struct ValuePromise : PromiseBase {
  std::optional<T> value;
  Task<T> get_return_object();
  template <typename U>
  void return_value(U&& v) {
    value.emplace(std::forward<U>(v));
  }
};

struct VoidPromise : PromiseBase {
  Task<void> get_return_object();
  void return_void() {}
};

}  // namespace internal

template <typename T>
class [[nodiscard]] Task : public internal::TaskBase<internal::ValuePromise<T>> {
 public:
  using promise_type = internal::ValuePromise<T>;
  T await_resume() { return std::move(*this->handle_.promise().value); }

 private:
  friend promise_type;
  explicit Task(std::coroutine_handle<promise_type> handle)
      : internal::TaskBase<promise_type>(handle) {}
};

template <>
class [[nodiscard]] Task<void> : public internal::TaskBase<internal::VoidPromise> {
 public:
  using promise_type = internal::VoidPromise;
  void await_resume() {}

 private:
  friend promise_type;
  explicit Task(std::coroutine_handle<promise_type> handle)
      : internal::TaskBase<promise_type>(handle) {}
};

namespace internal {

template <typename T>
Task<T> ValuePromise<T>::get_return_object() {
  return Task<T>(std::coroutine_handle<ValuePromise<T>>::from_promise(*this));
}

inline Task<void> VoidPromise::get_return_object() {
  return Task<void>(std::coroutine_handle<VoidPromise>::from_promise(*this));
}

}  // namespace internal

namespace internal {

// Owns itself: starts at once and frees its frame when it ends.
struct Detached {
  struct promise_type {
    Detached get_return_object() { return {}; }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() {}
    void unhandled_exception() noexcept { std::terminate(); }
  };
};

inline Detached RunDetached(Task<void> task) { co_await std::move(task); }

}  // namespace internal

// Starts `task` on the calling thread, up to its first suspension; nobody awaits it. It must
// keep alive, itself, whatever it uses.
inline void Spawn(Task<void> task) { internal::RunDetached(std::move(task)); }

}  // namespace tandem::router::async
