#include "backend/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/isa_table.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/thread_pool.h"
#include "util/error.h"

namespace ingot::cpu {

KvTile ContiguousKvTiles::tile(int64_t row0, int64_t h, int64_t, float*) const {
  KvTile kt;
  kt.k = k_ + static_cast<size_t>((row0 * kvh_ + h) * d_) * es_;
  kt.v = v_ + static_cast<size_t>((row0 * kvh_ + h) * dv_) * es_;
  kt.dt = dt_;
  kt.k_ld = kvh_ * d_;
  kt.v_ld = kvh_ * dv_;
  return kt;
}

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Visible keys [lo, hi] of one query row, in absolute positions; empty when hi < lo.
struct Range {
  int64_t lo = 0, hi = -1;
};

Range visible(const AttnParams& p, int64_t keys, int64_t i) {
  const int64_t qpos = p.q_offset + i;
  Range r{0, keys - 1};
  if (p.causal) r.hi = std::min(r.hi, qpos);
  if (p.window > 0) r.lo = std::max<int64_t>(0, qpos - p.window + 1);
  return {r.lo + p.key_base, r.hi + p.key_base};
}

// One call's fixed inputs.
struct Job {
  const float* q;
  AttnShape s;
  const KvTiles* kv;
  AttnParams p;
  int64_t group;  // query heads per KV head
};

// Online-softmax state of G vectors: m [G], l [G], acc [G, dv].
struct StateRef {
  float* m;
  float* l;
  float* acc;
};

void reset(const StateRef& st, int64_t G, int64_t dv) {
  std::fill(st.m, st.m + G, kNegInf);
  std::fill(st.l, st.l + G, 0.0f);
  std::fill(st.acc, st.acc + G * dv, 0.0f);
}

struct Scratch {
  std::vector<float> q, scores, tile, convert, chunk, total;
  std::vector<int64_t> first, last;
  void size_for(int64_t G, const AttnShape& s) {
    auto grow = [](auto& v, int64_t n) {
      if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
    };
    grow(q, G * s.d);
    grow(scores, G * kAttnTile);
    grow(tile, kAttnTile * (s.d + s.dv));
    grow(convert, kAttnTile * (s.d + s.dv));
    grow(chunk, G * (2 + s.dv));
    grow(total, G * (2 + s.dv));
    grow(first, G);
    grow(last, G);
  }
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

StateRef state_in(float* base, int64_t G, int64_t dv) { return {base, base + G, base + 2 * G}; }
// Folds chunk c (absolute keys [c, c + 1) * kAttnChunk) of KV head h for
// query rows [r0, r0 + R) (vectors qv [R * group, d], by row then head) into
// `st`, which starts fresh. Tiles cover absolute positions [t, t + 1) *
// kAttnTile, so lane x of a tile always holds the key at 16t + x.
void fold_chunk(const Job& j, int64_t h, int64_t r0, int64_t R, const Range* ranges, int64_t c, const float* qv,
                const StateRef& st, Scratch& w) {
  const int64_t G = R * j.group, base = j.p.key_base;
  const int64_t c0 = std::max(c * kAttnChunk, base), c1 = std::min((c + 1) * kAttnChunk, base + j.s.keys);
  int64_t ulo = c1, uhi = c0 - 1;
  for (int64_t r = 0; r < R; ++r) {
    const int64_t lo = std::max(ranges[r0 + r].lo, c0), hi = std::min(ranges[r0 + r].hi, c1 - 1);
    if (lo <= hi) ulo = std::min(ulo, lo), uhi = std::max(uhi, hi);
  }
  for (int64_t t = ulo / kAttnTile; uhi >= ulo && t <= uhi / kAttnTile; ++t) {
    const int64_t lane0 = t * kAttnTile;
    const int64_t a = std::max(lane0, ulo), b = std::min(lane0 + kAttnTile - 1, uhi);  // rows this tile loads
    for (int64_t r = 0; r < R; ++r) {
      const int64_t lo = std::max(ranges[r0 + r].lo, c0), hi = std::min(ranges[r0 + r].hi, c1 - 1);
      for (int64_t g = r * j.group; g < (r + 1) * j.group; ++g) {
        w.first[static_cast<size_t>(g)] = lo - lane0;
        w.last[static_cast<size_t>(g)] = hi - lane0;
      }
    }
    if (t < uhi / kAttnTile) {  // the next tile's rows, while this one is folded
      const int64_t na = lane0 + kAttnTile, nb = std::min(na + kAttnTile - 1, uhi);
      j.kv->prefetch(na - base, h, nb - na + 1);
    }
    const KvTile kt = j.kv->tile(a - base, h, b - a + 1, w.tile.data());
    AttnFold f{qv,      G,       j.s.d, j.s.dv,         kt.k,          kt.v,      kt.dt,       kt.k_ld,
               kt.v_ld, a - lane0, b - a + 1, w.first.data(), w.last.data(), j.p.scale, j.p.softcap, st.m,
               st.l,    st.acc,  w.scores.data(), w.convert.data()};
    attn_fold(f);
  }
}

// total <- total merged with a later chunk, for one vector.
void merge(float& m, float& l, float* acc, float mc, float lc, const float* accc, int64_t dv) {
  if (mc == kNegInf) return;  // the chunk saw no key of this vector
  if (m == kNegInf) {
    m = mc;
    l = lc;
    std::memcpy(acc, accc, static_cast<size_t>(dv) * sizeof(float));
    return;
  }
  const float mn = std::max(m, mc), a = m == mn ? 1.0f : std::exp(m - mn), b = mc == mn ? 1.0f : std::exp(mc - mn);
  l = l * a + lc * b;
  for (int64_t x = 0; x < dv; ++x) acc[x] = acc[x] * a + accc[x] * b;
  m = mn;
}

void merge_all(const StateRef& total, const StateRef& chunk, int64_t G, int64_t dv) {
  for (int64_t g = 0; g < G; ++g)
    merge(total.m[g], total.l[g], total.acc + g * dv, chunk.m[g], chunk.l[g], chunk.acc + g * dv, dv);
}

void write_out(float l, const float* acc, int64_t dv, float* o) {
  const float inv = l > 0 ? 1.0f / l : 0.0f;
  for (int64_t x = 0; x < dv; ++x) o[x] = acc[x] * inv;
}

// Query vectors of rows [r0, r0 + R) and KV head h, contiguous.
const float* gather_q(const Job& j, int64_t h, int64_t r0, int64_t R, Scratch& w) {
  const int64_t H = j.s.heads, d = j.s.d, G = j.group;
  for (int64_t r = 0; r < R; ++r)
    std::memcpy(w.q.data() + r * G * d, j.q + ((r0 + r) * H + h * G) * d, static_cast<size_t>(G * d) * sizeof(float));
  return w.q.data();
}

// One call's work as tasks: prompt rows go in blocks of rows per task (each
// block folding its chunks in order); a few decode rows have too few (row,
// head) pairs to keep every thread busy, so each (row, head, chunk) is a task
// and the chunks merge after. The numbers are the same either way.
class Plan {
 public:
  Plan(const AttnCall& c) : j_{c.q, c.s, c.kv, c.p, c.s.heads / c.s.kv_heads}, out_(c.out) {
    const AttnShape& s = c.s;
    INGOT_CHECK(s.kv_heads > 0 && s.heads % s.kv_heads == 0 && s.d > 0 && s.dv > 0 && s.keys >= 0 && s.rows >= 0,
                "attention shape");
    ranges_.resize(static_cast<size_t>(s.rows));
    int64_t chunks = 0;
    for (int64_t i = 0; i < s.rows; ++i) {
      const Range r = ranges_[static_cast<size_t>(i)] = visible(c.p, s.keys, i);
      if (r.lo <= r.hi) chunks += r.hi / kAttnChunk - r.lo / kAttnChunk + 1;
    }
    split_ = s.rows * s.kv_heads < 4 * pool().size() && chunks > s.rows;
    if (split_) {
      first_.assign(static_cast<size_t>(s.rows * s.kv_heads + 1), 0);
      for (int64_t i = 0; i < s.rows; ++i)
        for (int64_t h = 0; h < s.kv_heads; ++h) {
          first_[static_cast<size_t>(i * s.kv_heads + h)] = static_cast<int64_t>(chunk_tasks_.size());
          const Range& r = ranges_[static_cast<size_t>(i)];
          if (r.lo > r.hi) continue;
          for (int64_t ch = r.lo / kAttnChunk; ch <= r.hi / kAttnChunk; ++ch) chunk_tasks_.push_back({i, h, ch});
        }
      first_.back() = static_cast<int64_t>(chunk_tasks_.size());
      partial_.resize(chunk_tasks_.size() * static_cast<size_t>(slot()));
    } else {
      // A block widens each 16-bit tile once and folds it into all its
      // vectors, so larger blocks convert less per key; halve them only while
      // there are too few tasks to keep every thread busy.
      rb_ = std::max<int64_t>(1, attn_block_vectors() / j_.group);
      while (rb_ > 1 && (s.rows + rb_ - 1) / rb_ * s.kv_heads < 4 * pool().size()) rb_ = (rb_ + 1) / 2;
    }
  }

  int64_t tasks() const {
    return split_ ? static_cast<int64_t>(chunk_tasks_.size()) : (j_.s.rows + rb_ - 1) / rb_ * j_.s.kv_heads;
  }

  void run(int64_t task) {
    if (split_)
      run_chunk(task);
    else
      run_block(task);
  }

  // After every task: the split chunks merge in order.
  void finish() {
    if (!split_) return;
    const int64_t G = j_.group, dv = j_.s.dv, kvh = j_.s.kv_heads;
    std::vector<float> total_buf(static_cast<size_t>(slot()));
    const StateRef total = state_in(total_buf.data(), G, dv);
    for (int64_t i = 0; i < j_.s.rows; ++i)
      for (int64_t h = 0; h < kvh; ++h) {
        reset(total, G, dv);
        const auto at = static_cast<size_t>(i * kvh + h);
        for (int64_t k = first_[at]; k < first_[at + 1]; ++k) merge_all(total, partial_state(k), G, dv);
        for (int64_t g = 0; g < G; ++g)
          write_out(total.l[g], total.acc + g * dv, dv, out_ + (i * j_.s.heads + h * G + g) * dv);
      }
  }

 private:
  struct ChunkTask {
    int64_t row, h, c;
  };
  int64_t slot() const { return j_.group * (2 + j_.s.dv); }
  StateRef partial_state(int64_t k) { return state_in(partial_.data() + k * slot(), j_.group, j_.s.dv); }

  void run_chunk(int64_t k) {
    const ChunkTask& t = chunk_tasks_[static_cast<size_t>(k)];
    const int64_t G = j_.group;
    Scratch& w = scratch();
    w.size_for(G, j_.s);
    const StateRef st = partial_state(k);
    reset(st, G, j_.s.dv);
    fold_chunk(j_, t.h, t.row, 1, ranges_.data(), t.c, j_.q + (t.row * j_.s.heads + t.h * G) * j_.s.d, st, w);
  }

  void run_block(int64_t task) {
    const int64_t kvh = j_.s.kv_heads, dv = j_.s.dv;
    const int64_t b = task / kvh, h = task % kvh, r0 = b * rb_, R = std::min(rb_, j_.s.rows - r0), G = R * j_.group;
    Scratch& w = scratch();
    w.size_for(G, j_.s);
    const float* qv = gather_q(j_, h, r0, R, w);
    const StateRef total = state_in(w.total.data(), G, dv), chunk = state_in(w.chunk.data(), G, dv);
    reset(total, G, dv);
    int64_t cmin = std::numeric_limits<int64_t>::max(), cmax = -1;
    for (int64_t r = r0; r < r0 + R; ++r) {
      const Range& rg = ranges_[static_cast<size_t>(r)];
      if (rg.lo <= rg.hi) cmin = std::min(cmin, rg.lo / kAttnChunk), cmax = std::max(cmax, rg.hi / kAttnChunk);
    }
    for (int64_t c = cmin; c <= cmax; ++c) {
      reset(chunk, G, dv);
      fold_chunk(j_, h, r0, R, ranges_.data(), c, qv, chunk, w);
      merge_all(total, chunk, G, dv);
    }
    for (int64_t r = 0; r < R; ++r)
      for (int64_t g = 0; g < j_.group; ++g) {
        const int64_t v = r * j_.group + g;
        write_out(total.l[v], total.acc + v * dv, dv, out_ + ((r0 + r) * j_.s.heads + h * j_.group + g) * dv);
      }
  }

  Job j_;
  float* out_;
  std::vector<Range> ranges_;
  bool split_ = false;
  int64_t rb_ = 1;  // rows per block task
  std::vector<ChunkTask> chunk_tasks_;
  std::vector<int64_t> first_;  // chunk tasks of (row, head) i * kv_heads + h start here
  std::vector<float> partial_;
};

}  // namespace

void attention_tiled_many(const std::vector<AttnCall>& calls) {
  std::vector<Plan> plans;
  plans.reserve(calls.size());
  std::vector<int64_t> start{0};  // first global task of each plan
  for (const AttnCall& c : calls) {
    if (c.s.rows == 0) continue;
    plans.emplace_back(c);
    start.push_back(start.back() + plans.back().tasks());
  }
  if (plans.empty()) return;
  // One pool run for every call: a decode step of many sequences pays one
  // fork-join per layer, not one per sequence.
  pool().run(start.back(), [&](int64_t task) {
    const auto p = static_cast<size_t>(std::upper_bound(start.begin(), start.end(), task) - start.begin() - 1);
    plans[p].run(task - start[p]);
  });
  for (Plan& p : plans) p.finish();
}

void attention_tiled(const float* q, const AttnShape& s, const KvTiles& kv, const AttnParams& p, float* out) {
  attention_tiled_many({AttnCall{q, s, &kv, p, out}});
}

}  // namespace ingot::cpu
