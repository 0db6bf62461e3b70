//===- files_test.cpp - What AtomicFile may replace, and what not ---------===//
//
// Every output train writes goes through AtomicFile (files.h): a device node,
// a FIFO or this process's standard output is written in place, never
// renamed over; a symbolic link's file is replaced, not the link; one of the
// run's inputs is refused. The device nodes here are made in a temporary
// directory (mknod, as root), and /dev/stdout is a link of the test's own,
// so that a writer that still renames over them fails these tests without
// replacing the machine's /dev/null or /dev/stdout (/dev/null itself is
// written only after a node of the test's own survived).
//
//===----------------------------------------------------------------------===//
#include "support/error.h"
#include "support/files.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

using namespace dtc::rt;
using dtc::test::readFile;
using dtc::test::TempDir;
using dtc::test::writeFile;

namespace {

std::string errorOf(const std::function<void()> &f) {
  try {
    f();
  } catch (const Error &e) {
    return e.what();
  }
  return "<no error>";
}

void writeWhole(const std::string &path, const std::string &what, const std::string &data) {
  AtomicFile out(path, what);
  out.write(data);
  out.commit();
}

struct stat statOf(const std::string &path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st;
}

// Inputs recorded by a test are forgotten when it ends, whatever happens.
struct Inputs {
  ~Inputs() { forgetRunInputs(); }
};

TEST(OutputFiles, ACharacterDeviceIsWrittenInPlaceNeverReplaced) {
  TempDir dir;
  const std::string null = dir.file("null");
  if (::mknod(null.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0)
    GTEST_SKIP() << "mknod needs root: " << std::strerror(errno);
  int probe = ::open(null.c_str(), O_WRONLY);
  if (probe < 0)
    GTEST_SKIP() << "device nodes cannot be opened here (nodev?)";
  ::close(probe);
  EXPECT_EQ(errorOf([&] { checkWritable(null, "parameters file", "--save"); }), "<no error>");
  writeWhole(null, "parameters file", "a trained model");
  const struct stat st = statOf(null);
  // ASSERT: the machine's own /dev/null below only once this one survived.
  ASSERT_TRUE(S_ISCHR(st.st_mode)) << "the device node was replaced by a file";
  EXPECT_EQ(st.st_rdev, makedev(1, 3));
  EXPECT_EQ(dtc::test::listDir(dir.path()), std::vector<std::string>{"null"});
  writeWhole("/dev/null", "metrics file", "rows");
  EXPECT_TRUE(S_ISCHR(statOf("/dev/null").st_mode));
}

TEST(OutputFiles, AFifoIsWrittenInPlaceAndTheCheckDoesNotOpenIt) {
  TempDir dir;
  const std::string fifo = dir.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // No reader: the check must neither block nor send a reader an early end.
  EXPECT_EQ(errorOf([&] { checkWritable(fifo, "the predictions", "--output"); }), "<no error>");
  // A reader (it also holds a write end, so that nothing here blocks).
  const int reader = ::open(fifo.c_str(), O_RDWR | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  writeWhole(fifo, "the predictions", "class,p0\n1,0.5\n");
  char buf[256];
  const ssize_t n = ::read(reader, buf, sizeof buf);
  ::close(reader);
  EXPECT_EQ(std::string(buf, size_t(std::max<ssize_t>(n, 0))), "class,p0\n1,0.5\n");
  EXPECT_TRUE(S_ISFIFO(statOf(fifo).st_mode)) << "the FIFO was replaced by a file";
  EXPECT_EQ(dtc::test::listDir(dir.path()), std::vector<std::string>{"fifo"});
}

// Points this process's standard output at fd for the scope's lifetime.
class StdoutTo {
public:
  explicit StdoutTo(int fd) {
    std::fflush(stdout);
    saved_ = ::dup(STDOUT_FILENO);
    ::dup2(fd, STDOUT_FILENO);
  }
  ~StdoutTo() {
    std::fflush(stdout);
    ::dup2(saved_, STDOUT_FILENO);
    ::close(saved_);
  }

private:
  int saved_;
};

TEST(OutputFiles, StandardOutputIsWrittenThroughTheStream) {
  TempDir dir;
  // A link to /proc/self/fd/1 (what /dev/stdout is), stdout a pipe.
  const std::string link = dir.file("out.csv");
  ASSERT_EQ(::symlink("/proc/self/fd/1", link.c_str()), 0);
  int pipeFds[2];
  ASSERT_EQ(::pipe(pipeFds), 0);
  {
    StdoutTo redirect(pipeFds[1]);
    std::printf("printed first\n");
    EXPECT_EQ(errorOf([&] { checkWritable(link, "the predictions", "--output"); }),
              "<no error>");
    writeWhole(link, "the predictions", "class\n2\n");
  }
  ::close(pipeFds[1]);
  std::string got;
  char buf[256];
  for (ssize_t n; (n = ::read(pipeFds[0], buf, sizeof buf)) > 0;)
    got.append(buf, size_t(n));
  ::close(pipeFds[0]);
  EXPECT_EQ(got, "printed first\nclass\n2\n");
  EXPECT_TRUE(S_ISLNK(statOf(link).st_mode)) << "the link was replaced by a file";
  EXPECT_EQ(dtc::test::listDir(dir.path()), std::vector<std::string>{"out.csv"});

  // Standard output redirected to a file: appended there, after what was
  // printed, not renamed over it (which would lose the printed lines).
  const std::string log = dir.file("log");
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  {
    StdoutTo redirect(fd);
    std::printf("epoch 1/1\n");
    // (A link of the test's own, as /dev/stdout is: a writer that still
    // renamed over it must not replace the machine's /dev/stdout.)
    writeWhole(link, "the sample", "generated text\n");
    std::printf("done\n");
  }
  ::close(fd);
  EXPECT_EQ(readFile(log), "epoch 1/1\ngenerated text\ndone\n");
}

TEST(OutputFiles, ASymlinkedFileIsReplacedNotTheLink) {
  TempDir dir;
  ASSERT_EQ(::mkdir(dir.file("runs").c_str(), 0755), 0);
  const std::string file = dir.file("runs/ck.st"), link = dir.file("latest.st");
  writeFile(file, "old");
  ASSERT_EQ(::symlink("runs/ck.st", link.c_str()), 0);
  EXPECT_EQ(errorOf([&] { checkWritable(link, "checkpoint", "--checkpoint"); }), "<no error>");
  writeWhole(link, "checkpoint", "new");
  EXPECT_TRUE(S_ISLNK(statOf(link).st_mode)) << "the link was replaced by a file";
  EXPECT_EQ(readFile(file), "new");
  EXPECT_EQ(dtc::test::listDir(dir.file("runs")), std::vector<std::string>{"ck.st"});

  // A link to nothing, or to a directory: refused, named.
  const std::string dangling = dir.file("dangling.st");
  ASSERT_EQ(::symlink("nowhere/x.st", dangling.c_str()), 0);
  std::string e = errorOf([&] { checkWritable(dangling, "parameters file", "--save"); });
  EXPECT_NE(e.find("cannot write parameters file '" + dangling +
                   "': it is a symbolic link to 'nowhere/x.st', which does not exist"),
            std::string::npos)
      << e;
  e = errorOf([&] { writeWhole(dangling, "parameters file", "x"); });
  EXPECT_NE(e.find("which does not exist"), std::string::npos) << e;
  EXPECT_TRUE(S_ISLNK(statOf(dangling).st_mode));
  const std::string toDir = dir.file("dir.st");
  ASSERT_EQ(::symlink("runs", toDir.c_str()), 0);
  e = errorOf([&] { checkWritable(toDir, "metrics file", "--metrics"); });
  EXPECT_NE(e.find("Is a directory"), std::string::npos) << e;
}

TEST(OutputFiles, ALinkAnotherUserPlantedIsRefused) {
  if (::geteuid() != 0)
    GTEST_SKIP() << "making a link of another user needs root";
  TempDir dir;
  const std::string victim = dir.file("victim"), link = dir.file("out.csv");
  writeFile(victim, "precious");
  ASSERT_EQ(::symlink(victim.c_str(), link.c_str()), 0);
  ASSERT_EQ(::lchown(link.c_str(), 65534, 65534), 0);
  std::string e = errorOf([&] { checkWritable(link, "the predictions", "--output"); });
  EXPECT_NE(e.find("it is a symbolic link owned by another user (uid 65534)"),
            std::string::npos)
      << e;
  e = errorOf([&] { writeWhole(link, "the predictions", "x"); });
  EXPECT_NE(e.find("owned by another user"), std::string::npos) << e;
  EXPECT_EQ(readFile(victim), "precious");
}

TEST(OutputFiles, SocketsAndDirectoriesAreRefused) {
  TempDir dir;
  const std::string sock = dir.file("s");
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(sock.size(), sizeof addr.sun_path);
  std::strcpy(addr.sun_path, sock.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr), 0);
  std::string e = errorOf([&] { checkWritable(sock, "trace file", "--trace"); });
  EXPECT_NE(e.find("cannot write trace file '" + sock + "': it is a socket"), std::string::npos)
      << e;
  ::close(fd);
  EXPECT_TRUE(S_ISSOCK(statOf(sock).st_mode));
  e = errorOf([&] { writeWhole(dir.path(), "trace file", "x"); });
  EXPECT_NE(e.find("Is a directory"), std::string::npos) << e;
}

TEST(OutputFiles, AnOutputThatIsAnInputIsRefusedNamingBoth) {
  Inputs forget;
  TempDir dir;
  const std::string init = dir.file("m.st"), data = dir.file("train.csv");
  writeFile(init, "parameters");
  writeFile(data, "0,1,2\n");
  addRunInput("--init", init);
  addRunInput("--data", data);
  addRunInput("--init", dir.file("absent.st")); // not there: nothing to protect
  std::string e = errorOf([&] { checkWritable(init, "the predictions", "--output"); });
  EXPECT_NE(e.find("--output '" + init + "' is the same file as --init '" + init +
                   "': an output must not replace one of this run's inputs; give --output "
                   "another path"),
            std::string::npos)
      << e;
  // The same file by another name: a hard link, a symlink, another spelling.
  ASSERT_EQ(::link(data.c_str(), dir.file("hard.csv").c_str()), 0);
  ASSERT_EQ(::symlink("train.csv", dir.file("soft.csv").c_str()), 0);
  for (const std::string &name :
       {dir.file("hard.csv"), dir.file("soft.csv"), dir.path() + "/./train.csv"}) {
    e = errorOf([&] { checkWritable(name, "parameters file", "--save"); });
    EXPECT_NE(e.find("--save '" + name + "' is the same file as --data '" + data + "'"),
              std::string::npos)
        << e;
  }
  // The writer itself refuses it too (a writer no check came before).
  e = errorOf([&] { writeWhole(init, "the predictions", "class\n"); });
  EXPECT_NE(e.find("cannot write the predictions '" + init + "': it is the same file as "
                   "--init '" + init + "', one of this run's inputs"),
            std::string::npos)
      << e;
  EXPECT_EQ(readFile(init), "parameters");
  EXPECT_EQ(readFile(data), "0,1,2\n");
  // Another file is fine.
  EXPECT_EQ(errorOf([&] { checkWritable(dir.file("out.csv"), "the predictions", "--output"); }),
            "<no error>");
  forgetRunInputs("--init");
  EXPECT_EQ(errorOf([&] { checkWritable(init, "the predictions", "--output"); }), "<no error>");
}

TEST(OutputFiles, TheResumedCheckpointMayBeReplacedByTheNextOneOnly) {
  Inputs forget;
  TempDir dir;
  const std::string ck = dir.file("ck.st");
  writeFile(ck, "state");
  addRunInput("--resume", ck, "--checkpoint");
  EXPECT_EQ(errorOf([&] { checkWritable(ck, "checkpoint", "--checkpoint"); }), "<no error>");
  std::string e = errorOf([&] { checkWritable(ck, "parameters file", "--save"); });
  EXPECT_NE(e.find("--save '" + ck + "' is the same file as --resume '" + ck + "'"),
            std::string::npos)
      << e;
  e = errorOf([&] { checkWritable(ck, "metrics file", "--metrics"); });
  EXPECT_NE(e.find("is the same file as --resume"), std::string::npos) << e;
}

} // namespace
