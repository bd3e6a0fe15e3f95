// multipart/form-data parsing: boundaries from Content-Type headers, parts,
// headers and filenames, and every kind of malformed body as a clear error.
#include <gtest/gtest.h>

#include "server/multipart.h"
#include "util/error.h"

namespace ingot::server {
namespace {

const std::string kType = "multipart/form-data; boundary=XyZ";

// The message of the InvalidArgument error `fn` throws ("" when it does not throw).
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument) << e.what();
    return e.what();
  }
  return "";
}

std::string parse_error(const std::string& body, const MultipartLimits& lim = {}) {
  return error_of([&] { parse_form_data(kType, body, lim); });
}

bool inside(std::string_view part, const std::string& body) {
  return part.data() >= body.data() && part.data() + part.size() <= body.data() + body.size();
}

TEST(Multipart, MediaType) {
  EXPECT_TRUE(is_multipart_form_data("multipart/form-data; boundary=a"));
  EXPECT_TRUE(is_multipart_form_data("Multipart/Form-Data;boundary=a"));
  EXPECT_TRUE(is_multipart_form_data(" multipart/form-data "));
  EXPECT_FALSE(is_multipart_form_data("multipart/mixed; boundary=a"));
  EXPECT_FALSE(is_multipart_form_data("application/json"));
  EXPECT_FALSE(is_multipart_form_data(""));
}

TEST(Multipart, Boundary) {
  EXPECT_EQ(multipart_boundary("multipart/form-data; boundary=----WebKitFormBoundary7MA4YWxk"),
            "----WebKitFormBoundary7MA4YWxk");
  EXPECT_EQ(multipart_boundary("multipart/form-data; charset=utf-8; BOUNDARY=\"a b:c\""), "a b:c");
  EXPECT_EQ(multipart_boundary("multipart/form-data;boundary=x ;"), "x");
  EXPECT_EQ(multipart_boundary("multipart/form-data; boundary=\"q\\\"uote\""), "q\"uote");
  EXPECT_EQ(multipart_boundary("multipart/form-data; boundary=" + std::string(70, 'b')), std::string(70, 'b'));

  auto err = [](const std::string& t) { return error_of([&] { multipart_boundary(t); }); };
  EXPECT_NE(err("multipart/form-data").find("no boundary parameter"), std::string::npos);
  EXPECT_NE(err("multipart/form-data; charset=utf-8").find("no boundary parameter"), std::string::npos);
  EXPECT_NE(err("multipart/form-data; boundary=").find("boundary is empty"), std::string::npos);
  EXPECT_NE(err("multipart/form-data; boundary=\"\"").find("boundary is empty"), std::string::npos);
  EXPECT_NE(err("multipart/form-data; boundary=" + std::string(71, 'b')).find("71 bytes"), std::string::npos);
  EXPECT_NE(err("multipart/form-data; boundary=\"abc").find("not closed"), std::string::npos);
  EXPECT_NE(err("multipart/form-data; boundary").find("has no value"), std::string::npos);
  EXPECT_NE(err("multipart/form-data; boundary=a; boundary=b").find("appears twice"), std::string::npos);
  EXPECT_NE(err("multipart/form-data; boundary=\"a\"x").find("unexpected 'x'"), std::string::npos);
  EXPECT_NE(err("multipart/form-data; boundary=a\x01" "b").find("\\x01"), std::string::npos);
  EXPECT_NE(err("multipart/form-data; =x").find("unexpected '='"), std::string::npos);
  // Not multipart at all.
  EXPECT_NE(error_of([] { parse_form_data("application/json", "{}"); }).find("expected a multipart/form-data"),
            std::string::npos);
}

TEST(Multipart, PartsHeadersAndFilenames) {
  static const char kBody[] =
      "preamble to ignore\r\n"
      "--XyZ\r\n"
      "Content-Disposition: form-data; name=\"model\"\r\n"
      "\r\n"
      "whisper-1\r\n"
      "--XyZ  \r\n"  // transport padding after a boundary
      "content-disposition: FORM-DATA; filename=\"C:\\dir\\a \\\"b\\\".wav\"; NAME=file\r\n"
      "Content-Type:  audio/wav \r\n"
      "X-Other: ignored\r\n"
      "\r\n"
      "RIFF\r\n--Xy\0bytes\r\n"  // CR LF and a boundary prefix inside the content
      "\r\n"
      "--XyZ\r\n"
      "Content-Disposition: form-data; name=\"\"\r\n"
      "\r\n"
      "\r\n"
      "--XyZ--\r\n"
      "epilogue, ignored: --XyZ\r\nnot a part";
  const std::string b(kBody, sizeof(kBody) - 1);
  std::vector<MultipartPart> parts = parse_form_data(kType, b);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].name, "model");
  EXPECT_EQ(parts[0].filename, "");
  EXPECT_EQ(parts[0].content_type, "");
  EXPECT_EQ(parts[0].content, "whisper-1");
  EXPECT_EQ(parts[1].name, "file");
  EXPECT_EQ(parts[1].filename, "C:\\dir\\a \"b\".wav");  // \" unescaped, other backslashes kept
  EXPECT_EQ(parts[1].content_type, "audio/wav");
  EXPECT_EQ(parts[1].content, std::string_view("RIFF\r\n--Xy\0bytes\r\n", 18));
  EXPECT_EQ(parts[2].name, "");
  EXPECT_EQ(parts[2].content, "");
  for (const MultipartPart& p : parts) {
    EXPECT_TRUE(inside(p.content, b));
    if (!p.content_type.empty()) {
      EXPECT_TRUE(inside(p.content_type, b));
    }
  }
}

TEST(Multipart, BodyStartingWithBoundaryAndEmptyForm) {
  std::string one = "--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--XyZ--";
  auto parts = parse_form_data(kType, one);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].name, "a");
  EXPECT_EQ(parts[0].content, "1");
  EXPECT_TRUE(parse_form_data(kType, "--XyZ--").empty());
  EXPECT_TRUE(parse_form_data(kType, "junk\r\n--XyZ--\r\n").empty());
}

TEST(Multipart, MalformedBodiesAreClearErrors) {
  const std::string head = "--XyZ\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\n";
  const std::string good = head + "data\r\n--XyZ--\r\n";
  ASSERT_EQ(parse_error(good), "");
  // Every truncation of a valid body is refused (the closing boundary is what is missing) or, once the
  // closing "--XyZ--" is complete, accepted with the same content.
  for (size_t n = 0; n < good.size(); ++n) {
    std::string cut = good.substr(0, n);
    if (n >= head.size() + 4 + 2 + 7) {
      auto parts = parse_form_data(kType, cut);
      ASSERT_EQ(parts.size(), 1u) << n;
      EXPECT_EQ(parts[0].content, "data");
    } else {
      EXPECT_NE(parse_error(cut), "") << "accepted a body cut at " << n;
    }
  }
  auto has = [](const std::string& msg, const std::string& what) {
    EXPECT_NE(msg.find(what), std::string::npos) << "'" << msg << "' lacks '" << what << "'";
    EXPECT_EQ(msg.rfind("malformed multipart body: ", 0), 0u) << msg;
  };
  has(parse_error(""), "no boundary line '--XyZ'");
  has(parse_error("--other\r\n\r\nx\r\n--other--"), "no boundary line");
  has(parse_error("prefix--XyZ\r\n"), "no boundary line");  // must start a line
  has(parse_error("--XyZ"), "ends after a boundary line");
  has(parse_error("--XyZ   "), "ends after a boundary line");
  has(parse_error("--XyZx\r\n"), "followed by 'x\\x0d\\x0a'");
  has(parse_error("--XyZ\r\nContent-Disposition: form-data; name=a\r\n"), "do not end with an empty line");
  has(parse_error(head + "data without an end"), "part 1 ('file') is not followed by a boundary line");
  has(parse_error(head + "data\r\n--XyZ-"), "followed by '-'");
  has(parse_error("--XyZ\r\n\r\nno headers\r\n--XyZ--"), "no Content-Disposition header");
  has(parse_error("--XyZ\r\nContent-Type: text/plain\r\n\r\nx\r\n--XyZ--"), "no Content-Disposition header");
  has(parse_error("--XyZ\r\nContent-Disposition: attachment; name=a\r\n\r\nx\r\n--XyZ--"), "not 'form-data'");
  has(parse_error("--XyZ\r\nContent-Disposition: form-data; filename=a.wav\r\n\r\nx\r\n--XyZ--"),
      "no name parameter");
  has(parse_error("--XyZ\r\nContent-Disposition: form-data; name=\"a\r\n\r\nx\r\n--XyZ--"), "not closed");
  has(parse_error("--XyZ\r\nContent-Disposition: form-data; name=a; name=b\r\n\r\nx\r\n--XyZ--"), "appears twice");
  has(parse_error("--XyZ\r\nContent-Disposition: form-data; name=a\r\nContent-Disposition: form-data; name=b\r\n"
                  "\r\nx\r\n--XyZ--"),
      "two Content-Disposition headers");
  has(parse_error("--XyZ\r\nContent-Disposition: form-data; name=a\r\nContent-Type: a\r\nContent-Type: b\r\n"
                  "\r\nx\r\n--XyZ--"),
      "two Content-Type headers");
  has(parse_error("--XyZ\r\nno colon here\r\n\r\nx\r\n--XyZ--"), "without a name and ':': 'no colon here'");
  has(parse_error("--XyZ\r\n: empty name\r\n\r\nx\r\n--XyZ--"), "without a name");
  has(parse_error("--XyZ\r\nBad Name: v\r\n\r\nx\r\n--XyZ--"), "invalid header name 'Bad Name'");
  has(parse_error("--XyZ\r\nContent-Disposition: form-data; name=a\r\nX: 1\r\n 2\r\n\r\nx\r\n--XyZ--"),
      "folded header");
  has(parse_error("--XyZ\r\n\xff\xfe\r\n\r\nx\r\n--XyZ--"), "'\\xff\\xfe'");
}

TEST(Multipart, Limits) {
  std::string part = "--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\nv\r\n";
  std::string three;
  for (int i = 0; i < 3; ++i) three += part;
  three += "--XyZ--";
  MultipartLimits lim;
  lim.max_parts = 3;
  EXPECT_EQ(parse_form_data(kType, three, lim).size(), 3u);
  lim.max_parts = 2;
  EXPECT_NE(parse_error(three, lim).find("more than 2 parts"), std::string::npos);

  lim = {};
  lim.max_header_bytes = 64;
  std::string long_header = "--XyZ\r\nContent-Disposition: form-data; name=a\r\nX: " + std::string(100, 'h') +
                            "\r\n\r\nv\r\n--XyZ--";
  EXPECT_NE(parse_error(long_header, lim).find("headers are longer than 64 bytes"), std::string::npos);
  lim.max_header_bytes = 200;
  EXPECT_EQ(parse_error(long_header, lim), "");

  lim = {};
  lim.max_header_lines = 2;
  std::string many = "--XyZ\r\nContent-Disposition: form-data; name=a\r\nA: 1\r\nB: 2\r\n\r\nv\r\n--XyZ--";
  EXPECT_NE(parse_error(many, lim).find("more than 2 header lines"), std::string::npos);
  // The default limits: 256 parts.
  std::string lots;
  for (int i = 0; i < 257; ++i) lots += part;
  EXPECT_NE(parse_error(lots + "--XyZ--").find("more than 256 parts"), std::string::npos);
}

}  // namespace
}  // namespace ingot::server
