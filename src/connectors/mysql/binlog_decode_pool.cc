#include "connectors/mysql/binlog_decode_pool.h"

namespace sluice::mysql {

RowsDecodePool::RowsDecodePool(unsigned helpers) : arenas_(std::max(1u, helpers)) {
  threads_.reserve(arenas_.size());
  for (size_t i = 0; i < arenas_.size(); ++i)
    threads_.emplace_back([this, i](std::stop_token stop) { helper(stop, i); });
}

RowsDecodePool::~RowsDecodePool() {
  for (std::jthread& t : threads_) t.request_stop();
  {
    std::lock_guard lock(mu_);
    work_.notify_all();
  }
  threads_.clear();  // joins
}

RowsDecodePool::Job& RowsDecodePool::next() {
  std::lock_guard lock(mu_);  // helpers index jobs_ under it: growing it moves its index
  if (queued_ == jobs_.size()) jobs_.emplace_back();
  Job& j = jobs_[queued_];
  j.out.clear();
  j.status = ok_status();
  return j;
}

void RowsDecodePool::queue(Job& job) {
  std::lock_guard lock(mu_);
  if (&job != &jobs_[queued_]) return;  // not the one next() handed out
  job.state = Job::State::queued;
  ++queued_;
  ++outstanding_;
  if (idle_helpers_ > 0) work_.notify_one();
}

void RowsDecodePool::decode(Job& job, Arena& arena) {
  const size_t n = job.map->types.size();
  const std::string_view* names = job.names->data();
  std::string_view data = job.rows;
  // The next image: an array of the map's columns, named, decoded from `data` by `plan`; null
  // when its bytes are bad (job.status then says why).
  auto image = [&](const bl::RowPlan& plan, bl::ZeroDates* zero) -> Field* {
    Field* f = arena.allocate_array<Field>(n);
    for (size_t i = 0; i < n; ++i) f[i].name = names[i];
    auto used = bl::decode_row(plan, *job.map, data, arena, f, job.zero_dates ? zero : nullptr);
    if (!used.ok()) {
      job.status = std::move(used).error();
      return nullptr;
    }
    data.remove_prefix(used.value());
    return f;
  };
  while (!data.empty()) {
    Row r;
    r.before = image(job.before, &r.zero_before);
    if (!r.before) return;
    if (job.update) {
      r.after = image(job.after, &r.zero_after);
      if (!r.after) return;
    }
    job.out.push_back(r);
  }
}

const RowsDecodePool::Job& RowsDecodePool::take(Job& job, Arena& arena) {
  std::unique_lock lock(mu_);
  --outstanding_;
  for (;;) {
    if (job.state == Job::State::done) return job;
    Job* mine = nullptr;
    if (job.state == Job::State::queued) {
      mine = &job;  // nobody took it: decode it now
    } else {
      // A helper decodes it: meanwhile decode the newest job nobody took (the helpers work
      // from the oldest), else wait.
      for (size_t i = queued_; i-- > front_;)
        if (jobs_[i].state == Job::State::queued) {
          mine = &jobs_[i];
          break;
        }
    }
    if (mine) {
      mine->state = Job::State::running;
      lock.unlock();
      decode(*mine, arena);
      lock.lock();
      mine->state = Job::State::done;
      continue;
    }
    source_waiting_ = true;
    done_.wait(lock);
    source_waiting_ = false;
  }
}

void RowsDecodePool::drain(Arena& into) {
  std::unique_lock lock(mu_);
  for (size_t i = 0; i < queued_; ++i)
    if (jobs_[i].state == Job::State::queued) jobs_[i].state = Job::State::cancelled;
  source_waiting_ = true;
  done_.wait(lock, [&] { return running_ == 0; });
  source_waiting_ = false;
  for (Arena& a : arenas_) into.adopt(a);
  queued_ = front_ = outstanding_ = 0;
}

void RowsDecodePool::helper(std::stop_token stop, size_t index) {
  std::unique_lock lock(mu_);
  while (!stop.stop_requested()) {
    while (front_ < queued_ && jobs_[front_].state != Job::State::queued) ++front_;
    if (front_ == queued_) {
      ++idle_helpers_;
      work_.wait(lock, [&] { return stop.stop_requested() || front_ < queued_; });
      --idle_helpers_;
      continue;
    }
    Job& j = jobs_[front_++];
    j.state = Job::State::running;
    ++running_;
    lock.unlock();
    decode(j, arenas_[index]);
    lock.lock();
    j.state = Job::State::done;
    --running_;
    if (source_waiting_) done_.notify_all();
  }
}

}  // namespace sluice::mysql
