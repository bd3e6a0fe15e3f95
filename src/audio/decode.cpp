#include "audio/decode.h"

#include <algorithm>
#include <cmath>

#include <cstring>
#include <memory>

#include "util/error.h"

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/mem.h>
#include <libavutil/opt.h>
#include <libswresample/swresample.h>
}

namespace ingot::audio {

namespace {

std::string av_err(int e) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {0};
  av_strerror(e, buf, sizeof(buf));
  return buf;
}

// In-memory input for avformat (uploads arrive as bytes).
struct MemoryReader {
  const std::string* data;
  size_t pos = 0;
  static int read(void* opaque, uint8_t* buf, int size) {
    auto* r = static_cast<MemoryReader*>(opaque);
    size_t left = r->data->size() - r->pos;
    if (left == 0) return AVERROR_EOF;
    size_t n = std::min(left, static_cast<size_t>(size));
    std::memcpy(buf, r->data->data() + r->pos, n);
    r->pos += n;
    return static_cast<int>(n);
  }
  static int64_t seek(void* opaque, int64_t off, int whence) {
    auto* r = static_cast<MemoryReader*>(opaque);
    int64_t size = static_cast<int64_t>(r->data->size());
    if (whence == AVSEEK_SIZE) return size;
    int64_t np = whence == SEEK_SET ? off : whence == SEEK_CUR ? static_cast<int64_t>(r->pos) + off : size + off;
    if (np < 0 || np > size) return -1;
    r->pos = static_cast<size_t>(np);
    return np;
  }
};

struct Decoder {
  AVFormatContext* fmt = nullptr;
  AVCodecContext* codec = nullptr;
  SwrContext* swr = nullptr;
  AVPacket* pkt = nullptr;
  AVFrame* frame = nullptr;
  AVIOContext* avio = nullptr;
  ~Decoder() {
    av_frame_free(&frame);
    av_packet_free(&pkt);
    swr_free(&swr);
    avcodec_free_context(&codec);
    avformat_close_input(&fmt);
    if (avio) {
      av_freep(&avio->buffer);
      avio_context_free(&avio);
    }
  }
};

// Demuxers trust chunk sizes in headers (a RIFF LIST chunk claiming 2.7 GB
// made the WAV reader allocate that much). No real audio needs one FFmpeg
// allocation this large; a bigger request fails inside FFmpeg as ENOMEM.
void limit_ffmpeg_allocations() { av_max_alloc(256u << 20); }

}  // namespace

struct PcmReader::Impl {
  // Where the bytes come from, kept so that rewind can open them again.
  std::string path;
  std::shared_ptr<const std::string> bytes;
  int rate = 16000;
  DecodeLimits lim;
  std::string name;  // in error messages

  MemoryReader mem{};  // before `d`: the decoder's AVIO reads from it until it is freed
  Decoder d;
  int stream = -1;
  double duration = -1;
  // What the resampler was built for.
  AVChannelLayout in_layout{};
  int in_format = -1, in_rate = 0;
  // Resampled samples not read yet; one packet's worth at a time.
  std::vector<float> pending;
  size_t pending_pos = 0;
  int64_t produced = 0;
  enum class State { Reading, Flushing, Done } state = State::Reading;

  ~Impl() { av_channel_layout_uninit(&in_layout); }

  void open();
  void probe();
  void setup_resampler(const AVChannelLayout& layout, int format, int sample_rate);
  void flush_resampler();
  void convert_frame();
  bool more();
};

void PcmReader::Impl::open() {
  av_log_set_level(AV_LOG_QUIET);
  limit_ffmpeg_allocations();
  if (!bytes) {
    name = path;
    int rc = avformat_open_input(&d.fmt, path.c_str(), nullptr, nullptr);
    if (rc < 0)
      fail(rc == AVERROR(ENOENT) ? ErrorKind::NotFound : ErrorKind::BadFormat, path, ": cannot open audio (",
           av_err(rc), ")");
  } else {
    name = "upload";
    if (bytes->empty()) fail(ErrorKind::InvalidArgument, "the audio file is empty");
    mem = MemoryReader{bytes.get()};
    constexpr int kBuf = 1 << 16;
    auto* buf = static_cast<uint8_t*>(av_malloc(kBuf));
    d.avio = avio_alloc_context(buf, kBuf, 0, &mem, &MemoryReader::read, nullptr, &MemoryReader::seek);
    d.fmt = avformat_alloc_context();
    d.fmt->pb = d.avio;
    int rc = avformat_open_input(&d.fmt, nullptr, nullptr, nullptr);
    if (rc < 0) fail(ErrorKind::BadFormat, "upload: not a readable audio file (", av_err(rc), ")");
  }
  probe();
  // Decoding up to the first samples tells empty audio at once.
  if (!more()) fail(ErrorKind::InvalidArgument, name, ": the audio is empty");
}

void PcmReader::Impl::probe() {
  // Probing decodes a little of every stream: a header claiming thousands of
  // channels would make FFmpeg allocate gigabytes first, so check the header.
  for (unsigned i = 0; i < d.fmt->nb_streams; ++i)
    if (d.fmt->streams[i]->codecpar->ch_layout.nb_channels > 64)
      fail(ErrorKind::BadFormat, name, ": ", d.fmt->streams[i]->codecpar->ch_layout.nb_channels,
           " channels (at most 64)");
  int rc = avformat_find_stream_info(d.fmt, nullptr);
  if (rc < 0) fail(ErrorKind::BadFormat, name, ": not a readable media file (", av_err(rc), ")");
  stream = av_find_best_stream(d.fmt, AVMEDIA_TYPE_AUDIO, -1, -1, nullptr, 0);
  if (stream < 0) fail(ErrorKind::BadFormat, name, ": no audio stream");
  AVStream* st = d.fmt->streams[stream];
  // The container's duration (the stream's, else the file's) refuses long audio before decoding it.
  if (st->duration > 0 && st->time_base.den > 0) duration = static_cast<double>(st->duration) * av_q2d(st->time_base);
  else if (d.fmt->duration > 0) duration = static_cast<double>(d.fmt->duration) / AV_TIME_BASE;
  if (duration > lim.max_seconds)
    fail(ErrorKind::InvalidArgument, name, ": audio is ", static_cast<int64_t>(duration), " s long; the limit is ",
         static_cast<int64_t>(lim.max_seconds), " s");
  const AVCodec* dec = avcodec_find_decoder(st->codecpar->codec_id);
  if (!dec) fail(ErrorKind::BadFormat, name, ": no decoder for this audio codec");
  d.codec = avcodec_alloc_context3(dec);
  if (!d.codec || avcodec_parameters_to_context(d.codec, st->codecpar) < 0)
    fail(ErrorKind::BadFormat, name, ": cannot set up the audio decoder");
  rc = avcodec_open2(d.codec, dec, nullptr);
  if (rc < 0) fail(ErrorKind::BadFormat, name, ": cannot open the audio decoder (", av_err(rc), ")");
  if (d.codec->ch_layout.nb_channels <= 0) av_channel_layout_default(&d.codec->ch_layout, 1);
  // A forged header can claim any rate: building a resampler for an absurd
  // ratio takes seconds and gigabytes, so refuse rates no real audio has.
  if (d.codec->sample_rate < 1000 || d.codec->sample_rate > 768000)
    fail(ErrorKind::BadFormat, name, ": sample rate ", d.codec->sample_rate, " Hz is outside [1000, 768000]");
  if (d.codec->ch_layout.nb_channels > 64)
    fail(ErrorKind::BadFormat, name, ": ", d.codec->ch_layout.nb_channels, " channels (at most 64)");
  setup_resampler(d.codec->ch_layout, d.codec->sample_fmt, d.codec->sample_rate);
  d.pkt = av_packet_alloc();
  d.frame = av_frame_alloc();
  if (!d.pkt || !d.frame) fail(ErrorKind::BadFormat, name, ": out of memory for the audio decoder");
}

// The resampler is built for the layout, format and rate it is fed; a stream
// whose frames change them (MP3 frames may switch between mono and stereo)
// gets a new one, after the old one's delay is flushed. Fed a frame of
// another layout, swresample would read channel planes that are not there.
void PcmReader::Impl::setup_resampler(const AVChannelLayout& layout, int format, int sample_rate) {
  if (d.swr && format == in_format && sample_rate == in_rate && av_channel_layout_compare(&layout, &in_layout) == 0)
    return;
  if (layout.nb_channels <= 0 || layout.nb_channels > 64)
    fail(ErrorKind::BadFormat, name, ": ", layout.nb_channels, " channels (1 to 64)");
  if (sample_rate < 1000 || sample_rate > 768000)
    fail(ErrorKind::BadFormat, name, ": sample rate ", sample_rate, " Hz is outside [1000, 768000]");
  flush_resampler();
  swr_free(&d.swr);
  AVChannelLayout mono = AV_CHANNEL_LAYOUT_MONO;
  int r = swr_alloc_set_opts2(&d.swr, &mono, AV_SAMPLE_FMT_FLT, rate, const_cast<AVChannelLayout*>(&layout),
                              static_cast<AVSampleFormat>(format), sample_rate, 0, nullptr);
  if (r < 0 || swr_init(d.swr) < 0) fail(ErrorKind::BadFormat, name, ": unsupported sample format or rate");
  av_channel_layout_uninit(&in_layout);
  if (av_channel_layout_copy(&in_layout, &layout) < 0) fail(ErrorKind::BadFormat, name, ": bad channel layout");
  in_format = format;
  in_rate = sample_rate;
}

// The resampler's delay, onto `pending`.
void PcmReader::Impl::flush_resampler() {
  if (!d.swr) return;
  int n = swr_get_out_samples(d.swr, 0);
  if (n <= 0) return;
  size_t old = pending.size();
  pending.resize(old + static_cast<size_t>(n));
  uint8_t* dst = reinterpret_cast<uint8_t*>(pending.data() + old);
  int got = swr_convert(d.swr, &dst, n, nullptr, 0);
  pending.resize(old + static_cast<size_t>(std::max(got, 0)));
}

void PcmReader::Impl::convert_frame() {
  // A frame that leaves a parameter unset has the decoder's.
  setup_resampler(d.frame->ch_layout.nb_channels > 0 ? d.frame->ch_layout : d.codec->ch_layout,
                  d.frame->format >= 0 ? d.frame->format : d.codec->sample_fmt,
                  d.frame->sample_rate > 0 ? d.frame->sample_rate : d.codec->sample_rate);
  int n = swr_get_out_samples(d.swr, d.frame->nb_samples);
  size_t old = pending.size();
  pending.resize(old + static_cast<size_t>(std::max(n, 0)));
  uint8_t* dst = reinterpret_cast<uint8_t*>(pending.data() + old);
  int got = swr_convert(d.swr, &dst, n, const_cast<const uint8_t**>(d.frame->extended_data), d.frame->nb_samples);
  if (got < 0) fail(ErrorKind::BadFormat, name, ": resampling failed");
  pending.resize(old + static_cast<size_t>(got));
  av_frame_unref(d.frame);
  produced += got;
  if (static_cast<double>(produced) > lim.max_seconds * rate)
    fail(ErrorKind::InvalidArgument, name, ": audio is longer than the limit of ", static_cast<int64_t>(lim.max_seconds),
         " s");
}

// Decodes until there are samples to read; false at the end of the audio.
bool PcmReader::Impl::more() {
  while (pending_pos == pending.size()) {
    pending.clear();
    pending_pos = 0;
    if (state == State::Done) return false;
    int r = avcodec_receive_frame(d.codec, d.frame);
    if (r == 0) {
      convert_frame();
      continue;
    }
    if (r != AVERROR(EAGAIN) && r != AVERROR_EOF)
      fail(ErrorKind::BadFormat, name, ": corrupt audio data (", av_err(r), ")");
    if (state == State::Flushing) {  // the decoder is drained: what the resampler still holds ends the audio
      flush_resampler();
      state = State::Done;
      continue;
    }
    int rc = av_read_frame(d.fmt, d.pkt);
    if (rc < 0) {  // the end of the file (or an unreadable rest): drain the decoder
      avcodec_send_packet(d.codec, nullptr);
      state = State::Flushing;
      continue;
    }
    if (d.pkt->stream_index == stream) {
      int s = avcodec_send_packet(d.codec, d.pkt);
      if (s < 0 && s != AVERROR(EAGAIN) && s != AVERROR_INVALIDDATA) {
        av_packet_unref(d.pkt);
        fail(ErrorKind::BadFormat, name, ": corrupt audio packet (", av_err(s), ")");
      }
    }
    av_packet_unref(d.pkt);
  }
  return true;
}

PcmReader::PcmReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PcmReader::~PcmReader() = default;

std::unique_ptr<PcmReader> PcmReader::open_file(const std::string& path, int rate, const DecodeLimits& lim) {
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->rate = rate;
  impl->lim = lim;
  impl->open();
  return std::unique_ptr<PcmReader>(new PcmReader(std::move(impl)));
}

std::unique_ptr<PcmReader> PcmReader::open_memory(std::shared_ptr<const std::string> bytes, int rate,
                                                  const DecodeLimits& lim) {
  if (!bytes) fail(ErrorKind::InvalidArgument, "the audio file is empty");
  auto impl = std::make_unique<Impl>();
  impl->bytes = std::move(bytes);
  impl->rate = rate;
  impl->lim = lim;
  impl->open();
  return std::unique_ptr<PcmReader>(new PcmReader(std::move(impl)));
}

size_t PcmReader::read(float* out, size_t n) {
  Impl& m = *impl_;
  size_t done = 0;
  while (done < n && m.more()) {
    const size_t k = std::min(n - done, m.pending.size() - m.pending_pos);
    // Float codecs can carry samples past full scale, or NaN/Inf: keep the
    // documented [-1, 1] so the mel front end never sees a non-finite value.
    for (size_t i = 0; i < k; ++i) {
      const float x = m.pending[m.pending_pos + i];
      out[done + i] = std::isfinite(x) ? std::clamp(x, -1.0f, 1.0f) : 0.0f;
    }
    m.pending_pos += k;
    done += k;
  }
  return done;
}

void PcmReader::rewind() {
  auto fresh = std::make_unique<Impl>();
  fresh->path = impl_->path;
  fresh->bytes = impl_->bytes;
  fresh->rate = impl_->rate;
  fresh->lim = impl_->lim;
  fresh->open();
  impl_ = std::move(fresh);
}

double PcmReader::duration_hint() const { return impl_->duration; }

namespace {

std::vector<float> read_all(PcmReader& r) {
  std::vector<float> out;
  constexpr size_t kChunk = 1 << 16;
  while (true) {
    const size_t old = out.size();
    out.resize(old + kChunk);
    const size_t got = r.read(out.data() + old, kChunk);
    out.resize(old + got);
    if (got < kChunk) return out;
  }
}

}  // namespace

std::vector<float> decode_file(const std::string& path, int rate, const DecodeLimits& lim) {
  return read_all(*PcmReader::open_file(path, rate, lim));
}

std::vector<float> decode_memory(const std::string& bytes, int rate, const DecodeLimits& lim) {
  // A view of the caller's bytes: they outlive the reader.
  std::shared_ptr<const std::string> view(std::shared_ptr<const std::string>(), &bytes);
  return read_all(*PcmReader::open_memory(view, rate, lim));
}

}  // namespace ingot::audio
