#include "speech/transcribe.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "audio/mel.h"
#include "util/error.h"
#include "util/strings.h"

namespace ingot::speech {

namespace {

constexpr int kSampleRate = 16000;
constexpr double kSecondsPerTimestamp = 0.02;  // one timestamp token per 2 encoder frames

}  // namespace

WindowCut cut_window(const std::vector<int32_t>& tokens, const LogitRules& rules, double t0, int64_t len,
                     int64_t window) {
  WindowCut c;
  c.advance = len;
  c.consumed = tokens;
  if (!rules.timestamps() || rules.ts_begin() < 0) {
    Segment s;
    s.start = t0;
    s.end = t0 + static_cast<double>(len) / kSampleRate;
    s.tokens = tokens;
    c.segments.push_back(s);
    return c;
  }
  Segment cur;
  bool open = false;
  size_t closed_at = 0;  // tokens up to the last timestamp that closed a segment
  int32_t last_closing = -1;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t t = tokens[i];
    if (rules.is_timestamp(t)) {
      const double at = t0 + (t - rules.ts_begin()) * kSecondsPerTimestamp;
      if (!open) {
        cur = Segment();
        cur.start = at;
        open = true;
      } else {
        cur.end = at;
        open = false;
        c.segments.push_back(cur);
        closed_at = i + 1;
        last_closing = t;
      }
    } else if (open) {
      cur.tokens.push_back(t);
    }
  }
  const size_t n = tokens.size();
  const bool single_ending = n >= 1 && rules.is_timestamp(tokens[n - 1]) && !(n >= 2 && rules.is_timestamp(tokens[n - 2]));
  if (!single_ending && last_closing >= 0 && len == window) {
    // Speech runs on past the last closed segment: the next window starts there and decodes the rest
    // again, so what followed is neither a segment nor previous text. A window always moves on by at
    // least a second, so the number of windows stays bounded by the duration whatever the timestamps say.
    c.advance = std::max<int64_t>(static_cast<int64_t>((last_closing - rules.ts_begin()) * kSecondsPerTimestamp * kSampleRate),
                                  kSampleRate);
    c.consumed.assign(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(closed_at));
    return c;
  }
  if (open && !cur.tokens.empty()) {  // unterminated text runs to the window's end
    cur.end = t0 + static_cast<double>(len) / kSampleRate;
    c.segments.push_back(cur);
  }
  return c;
}

namespace {

// Gives each segment of a window the words of its tokens, in order, and lets
// the words' times (seconds from the window start) settle the segment's edges.
void attach_words(std::vector<Segment>& segs, std::vector<Word> words, double t0, const LogitRules& rules) {
  size_t w = 0;
  for (Segment& s : segs) {
    int64_t need = 0;
    for (int32_t t : s.tokens) need += rules.is_timestamp(t) ? 0 : 1;
    int64_t got = 0;
    while (w < words.size() && got < need) {
      Word x = words[w++];
      got += x.tokens;
      x.start += t0;
      x.end += t0;
      s.words.push_back(std::move(x));
    }
    if (s.words.empty()) continue;
    // Words stay inside their segment; a segment's edges follow its words where they are inside it.
    for (Word& x : s.words) {
      x.start = std::clamp(x.start, s.start, s.end);
      x.end = std::clamp(x.end, x.start, s.end);
    }
    s.start = s.words.front().start;
    s.end = std::max(s.words.back().end, s.start);
  }
}

}  // namespace

namespace {
template <typename... Args>
[[noreturn]] void bad_option(const std::string& field, Args&&... args) {
  throw OptionError(field, str_cat(std::forward<Args>(args)...));
}
}  // namespace

void check_options(const TranscribeOptions& opt, const WhisperModel& model, const WhisperGeneration& gen) {
  if (opt.task != "transcribe" && opt.task != "translate") bad_option("task", "task must be transcribe or translate");
  if (opt.temperatures.empty()) bad_option("temperature", "no decoding temperature given");
  for (float t : opt.temperatures)
    if (!(t >= 0.0f) || t > 2.0f) bad_option("temperature", "temperature must be in [0, 2]");
  if (opt.beam_size < 1 || opt.beam_size > 32) bad_option("beam_size", "beam_size must be in [1, 32]");
  if (opt.best_of < 1 || opt.best_of > 32) bad_option("best_of", "best_of must be in [1, 32]");
  if (!(opt.patience > 0) || opt.patience > 32) bad_option("patience", "patience must be in (0, 32]");
  if (opt.length_penalty && !(*opt.length_penalty >= 0 && *opt.length_penalty <= 10))
    bad_option("length_penalty", "length_penalty must be in [0, 10]");
  if (opt.no_speech_threshold && !(*opt.no_speech_threshold >= 0 && *opt.no_speech_threshold <= 1))
    bad_option("no_speech_threshold", "no_speech_threshold must be in [0, 1]");
  if (!std::isfinite(opt.compression_ratio_threshold))
    bad_option("compression_ratio_threshold", "compression_ratio_threshold must be a number");
  if (!std::isfinite(opt.logprob_threshold)) bad_option("log_prob_threshold", "log_prob_threshold must be a number");
  if (opt.max_new_tokens < 0) bad_option("max_new_tokens", "max_new_tokens must be >= 0");
  if (opt.task == "translate" && (!gen.is_multilingual || gen.translate_id < 0))
    bad_option("model", "this model cannot translate (it is English-only or has no translate token)");
  if (!gen.is_multilingual && !opt.language.empty() && opt.language != "en" && opt.language != "<|en|>")
    bad_option("language", "this model is English-only; language '", opt.language, "' is not available");
  if (gen.is_multilingual && !gen.lang_to_id.empty() && !opt.language.empty()) {
    try {
      gen.language_token(opt.language);
    } catch (const Error& e) {
      bad_option("language", e.what());
    }
  }
  if (!opt.prompt_ids.empty() && gen.prev_sot_id < 0)
    bad_option("prompt", "this model has no <|startofprev|> token, so it takes no text prompt");
  if (opt.word_timestamps && gen.alignment_heads.empty())
    bad_option("timestamp_granularities",
               "word timestamps need the checkpoint's alignment heads (alignment_heads in generation_config.json)");
  for (const auto& [layer, head] : gen.alignment_heads)
    if (layer < 0 || layer >= model.config().decoder_layers || head < 0 || head >= model.config().decoder_heads)
      fail(ErrorKind::BadFormat, "generation_config.json: alignment head (", layer, ", ", head, ") is not in the model");
}

WindowPrompt window_prompt(const WhisperGeneration& gen, const std::vector<int32_t>& previous,
                          const std::vector<int32_t>& sot_sequence, bool timestamps, size_t max_previous) {
  WindowPrompt p;
  if (!previous.empty() && gen.prev_sot_id >= 0 && max_previous > 0) {
    // Like the reference, keep the last max_previous tokens.
    const size_t from = previous.size() > max_previous ? previous.size() - max_previous : 0;
    p.tokens.push_back(gen.prev_sot_id);
    p.tokens.insert(p.tokens.end(), previous.begin() + static_cast<std::ptrdiff_t>(from), previous.end());
  }
  p.sot_index = p.tokens.size();
  p.tokens.insert(p.tokens.end(), sot_sequence.begin(), sot_sequence.end());
  if (!timestamps && gen.no_timestamps_id >= 0) p.tokens.push_back(gen.no_timestamps_id);
  return p;
}

namespace {

// The samples of a source from `seek` on, read in order: holds the current
// window and nothing before it, so memory stays one window whatever the length.
class WindowFeed {
 public:
  explicit WindowFeed(audio::PcmSource& src) : src_(src) {}
  // Up to `n` samples from `seek` (fewer only at the end of the audio); `seek`
  // never goes back, nor past what was read (a window advances at most its length).
  std::vector<float> at(int64_t seek, int64_t n) {
    INGOT_CHECK(seek >= base_ && seek <= read(), "window seek ", seek, " outside the samples held");
    buf_.erase(buf_.begin(), buf_.begin() + (seek - base_));
    base_ = seek;
    const int64_t have = static_cast<int64_t>(buf_.size());
    if (have < n && !end_) {
      buf_.resize(static_cast<size_t>(n));
      const size_t want = static_cast<size_t>(n - have);
      const size_t got = src_.read(buf_.data() + have, want);
      buf_.resize(static_cast<size_t>(have) + got);
      end_ = got < want;
    }
    return std::vector<float>(buf_.begin(), buf_.begin() + std::min<int64_t>(n, static_cast<int64_t>(buf_.size())));
  }
  // Samples read from the source so far.
  int64_t read() const { return base_ + static_cast<int64_t>(buf_.size()); }

 private:
  audio::PcmSource& src_;
  std::vector<float> buf_;  // samples [base_, base_ + size)
  int64_t base_ = 0;
  bool end_ = false;
};

// `timeline` (with VAD) maps times in `src` back onto the recording it was
// gathered from. `samples` gets how many samples were read.
Transcript transcribe_source(const WhisperModel& model, const WhisperGeneration& gen, audio::PcmSource& src,
                             const SpeechTimeline* timeline, const TranscribeOptions& opt, const TextFn& text,
                             Dump* dump, int64_t& samples) {
  audio::MelConfig mc;
  mc.n_mels = static_cast<int>(model.config().num_mel_bins);
  const int64_t window = mc.n_samples;
  const bool timestamps = opt.timestamps || opt.word_timestamps;
  const LogitRules rules(gen, model.config().vocab_size, timestamps);
  const WindowDecoder dec(model, gen, rules, text);
  Transcript out;
  out.task = opt.task;
  if (!gen.is_multilingual) out.language = "en";  // English-only checkpoints
  std::mt19937_64 rng(opt.seed);
  int32_t lang_id = -1;
  // Everything decoded so far (the initial prompt first); windows see what came after prompt_reset.
  std::vector<int32_t> history = opt.prompt_ids;
  size_t prompt_reset = 0;
  const size_t max_previous = static_cast<size_t>(std::max<int64_t>(0, model.config().max_target_positions / 2 - 1));
  WindowFeed feed(src);
  for (int64_t seek = 0;;) {
    if (opt.cancelled && opt.cancelled()) break;
    const std::vector<float> chunk = feed.at(seek, window);
    if (chunk.empty()) break;  // the end of the audio
    const int64_t len = static_cast<int64_t>(chunk.size());
    Tensor mel = audio::log_mel(chunk, mc);
    Tensor enc = model.encode(mel);
    auto cross = model.cross_kv(enc);  // one per window: every attempt and beam reads it
    const bool first = dump && out.segments.empty() && seek == 0;
    std::vector<int32_t> sot_sequence{gen.decoder_start_token_id};
    if (gen.is_multilingual && !gen.lang_to_id.empty()) {
      if (lang_id < 0) {
        if (!opt.language.empty()) {
          lang_id = gen.language_token(opt.language);
        } else {  // detect from the first window: the likeliest language token after <|startoftranscript|>
          auto st = model.start(cross);
          std::vector<float> row = model.decode(st, {gen.decoder_start_token_id}).to_f32_vector();
          float best = -std::numeric_limits<float>::infinity();
          for (const auto& [name, id] : gen.lang_to_id)
            if (id < static_cast<int32_t>(row.size()) && row[static_cast<size_t>(id)] > best) {
              best = row[static_cast<size_t>(id)];
              lang_id = id;
            }
        }
      }
      sot_sequence.push_back(lang_id);
      out.language = gen.language_of(lang_id);
    }
    const int32_t task_id = opt.task == "translate" ? gen.translate_id : gen.transcribe_id;
    if (task_id >= 0) sot_sequence.push_back(task_id);
    const std::vector<int32_t> previous(history.begin() + static_cast<std::ptrdiff_t>(prompt_reset), history.end());
    const WindowPrompt wp = window_prompt(gen, previous, sot_sequence, timestamps, max_previous);
    const std::vector<int32_t>& prompt = wp.tokens;
    const size_t sot_index = wp.sot_index;
    if (first) {
      dump->mel = mel;
      dump->encoder_out = enc.to(Device::CPU);
      dump->decoder_ids = prompt;
    }
    WindowResult r;
    for (size_t ti = 0; ti < opt.temperatures.size(); ++ti) {
      DecodeOptions d;
      d.temperature = opt.temperatures[ti];
      d.beam_size = opt.beam_size;
      d.best_of = opt.best_of;
      d.patience = opt.patience;
      d.length_penalty = opt.length_penalty;
      d.max_new_tokens = opt.max_new_tokens;
      r = dec.run(cross, prompt, sot_index, d, rng, first && ti == 0 ? dump : nullptr);
      const bool last = ti + 1 == opt.temperatures.size() || !opt.fallback;
      bool bad = r.compression > opt.compression_ratio_threshold || r.avg_logprob < opt.logprob_threshold;
      if (opt.no_speech_threshold && r.no_speech_prob > *opt.no_speech_threshold) bad = false;  // silence: no retry
      if (!bad || last) break;
    }
    const double t0 = static_cast<double>(seek) / kSampleRate;
    // Silence, as the model judges it: nothing of this window is kept.
    if (opt.no_speech_threshold && r.no_speech_prob > *opt.no_speech_threshold &&
        !(r.avg_logprob > opt.logprob_threshold)) {
      seek += len;
      continue;
    }
    WindowCut cut = cut_window(r.tokens, rules, t0, len, window);
    for (Segment& s : cut.segments) s.text = text ? text(s.tokens) : "";
    if (opt.word_timestamps) {
      AlignInput in;
      in.cross = cross;
      in.sot_sequence = sot_sequence;
      in.audio_frames = len / mc.hop / 2;
      in.language = out.language;
      for (size_t i = 0; i < r.tokens.size(); ++i)
        if (!rules.is_timestamp(r.tokens[i])) {
          in.text_tokens.push_back(r.tokens[i]);
          in.token_logprobs.push_back(i < r.token_logprobs.size() ? r.token_logprobs[i] : 0.0f);
        }
      attach_words(cut.segments, align_words(model, gen, in, text), t0, rules);
    }
    for (Segment& s : cut.segments) {
      s.avg_logprob = r.avg_logprob;
      s.compression_ratio = r.compression;
      s.temperature = r.temperature;
      s.no_speech_prob = r.no_speech_prob;
      if (timeline) {
        s.start = timeline->original(s.start, false);
        s.end = timeline->original(s.end, true);
        for (Word& w : s.words) {
          w.start = timeline->original(w.start, false);
          w.end = timeline->original(w.end, true);
        }
      }
      if (opt.on_segment) opt.on_segment(s);
      out.text += s.text;
      out.segments.push_back(std::move(s));
    }
    history.insert(history.end(), cut.consumed.begin(), cut.consumed.end());
    if (!opt.condition_on_previous_text || r.temperature > opt.prompt_reset_on_temperature) prompt_reset = history.size();
    seek += cut.advance;
  }
  samples = feed.read();
  return out;
}

}  // namespace

Transcript transcribe(const WhisperModel& model, const WhisperGeneration& gen, const std::vector<float>& pcm,
                      const TranscribeOptions& opt, const TextFn& text, Dump* dump) {
  if (pcm.empty()) fail(ErrorKind::InvalidArgument, "the audio is empty");
  audio::PcmView src(pcm);
  Transcript t = transcribe(model, gen, src, opt, text, dump);
  t.duration = static_cast<double>(pcm.size()) / kSampleRate;  // also when cancelled part way
  return t;
}

Transcript transcribe(const WhisperModel& model, const WhisperGeneration& gen, audio::PcmSource& src,
                      const TranscribeOptions& opt, const TextFn& text, Dump* dump) {
  check_options(opt, model, gen);
  int64_t samples = 0;
  if (!opt.vad) {
    Transcript t = transcribe_source(model, gen, src, nullptr, opt, text, dump, samples);
    if (samples == 0) fail(ErrorKind::InvalidArgument, "the audio is empty");
    t.duration = static_cast<double>(samples) / kSampleRate;
    return t;
  }
  // Two passes: the energy of every frame sets the threshold, then only the speech is read again.
  EnergyMeter meter;
  std::vector<float> buf(1 << 16);
  for (size_t got; (got = src.read(buf.data(), buf.size())) > 0;) meter.add(buf.data(), got);
  buf = {};
  if (meter.samples() == 0) fail(ErrorKind::InvalidArgument, "the audio is empty");
  SpeechTimeline timeline(meter.speech(opt.vad_options), kSampleRate);
  Transcript t;
  if (!timeline.spans().empty()) {
    src.rewind();
    GatheredSource speech(src, timeline.spans());
    t = transcribe_source(model, gen, speech, &timeline, opt, text, dump, samples);
  } else {
    t.task = opt.task;
    if (!gen.is_multilingual) t.language = "en";
  }
  t.duration = static_cast<double>(meter.samples()) / kSampleRate;
  t.speech = timeline.spans();
  return t;
}

}  // namespace ingot::speech
