//===- job.h - Running whole train jobs from tests ------------------------===//
//
// runJob starts a command (a train program, or mpirun of one) in its own
// process group under a deadline, with stdout and stderr interleaved in
// Job::out. Each job carries a unique DTCRT_TEST_JOB variable, and the
// processes of the job still alive after it ended (found through
// /proc/*/environ) are counted in Job::leftovers and killed.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "test_util.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace dtc::test {

using Clock = std::chrono::steady_clock;

struct Job {
  int rc = -1; // exit status, or 128 + signal
  bool timedOut = false;
  double seconds = 0;
  std::string out;   // stdout and stderr, interleaved
  int leftovers = 0; // processes of the job still alive after it ended
};

inline std::vector<pid_t> jobProcesses(const std::string &tag) {
  std::vector<pid_t> pids;
  DIR *proc = opendir("/proc");
  if (!proc)
    return pids;
  const std::string needle = "DTCRT_TEST_JOB=" + tag;
  while (dirent *d = readdir(proc)) {
    if (d->d_name[0] < '0' || d->d_name[0] > '9')
      continue;
    std::string env = readFile(std::string("/proc/") + d->d_name + "/environ");
    for (size_t p = 0; p < env.size(); p = env.find('\0', p) + 1) {
      if (env.compare(p, needle.size() + 1, needle + '\0') == 0 ||
          (env.compare(p, needle.size(), needle) == 0 && p + needle.size() == env.size())) {
        pids.push_back(pid_t(std::atoi(d->d_name)));
        break;
      }
      if (env.find('\0', p) == std::string::npos)
        break;
    }
  }
  closedir(proc);
  return pids;
}

// Runs argv with extra environment variables; kills the job's process group
// after timeoutSeconds.
inline Job runJob(std::vector<std::string> argv, std::vector<std::string> env, double timeoutSeconds) {
  static std::atomic<int> counter{0};
  const std::string tag = std::to_string(::getpid()) + "-" + std::to_string(++counter);
  env.push_back("DTCRT_TEST_JOB=" + tag);
  char outPath[] = "/tmp/dtcrt-job-XXXXXX";
  int outFd = mkstemp(outPath);
  Job job;
  if (outFd < 0) {
    ADD_FAILURE() << "mkstemp failed";
    return job;
  }
  const auto start = Clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    for (const auto &kv : env)
      putenv(const_cast<char *>(kv.c_str()));
    dup2(outFd, 1);
    dup2(outFd, 2);
    std::vector<char *> args;
    for (auto &a : argv)
      args.push_back(a.data());
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::perror("execvp");
    _exit(127);
  }
  setpgid(pid, pid);
  int status = 0;
  for (;;) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid)
      break;
    if (std::chrono::duration<double>(Clock::now() - start).count() > timeoutSeconds) {
      job.timedOut = true;
      kill(-pid, SIGTERM);
      std::this_thread::sleep_for(std::chrono::seconds(2));
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  job.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  job.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  // The launcher may take a moment to reap its ranks; then nothing of the
  // job may remain.
  std::vector<pid_t> left;
  for (int i = 0; i < 100; ++i) {
    left = jobProcesses(tag);
    if (left.empty())
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  job.leftovers = int(left.size());
  for (pid_t p : left)
    kill(p, SIGKILL);
  close(outFd);
  job.out = readFile(outPath);
  unlink(outPath);
  return job;
}

} // namespace dtc::test
