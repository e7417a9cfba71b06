// The tasks a run can name (config "task"), each from its own declaration (tasks/task.hpp). To
// add a task: its header, its tests, and one line below.
#pragma once

#include <emergent/core/error.hpp>
#include <emergent/core/shape.hpp>
#include <emergent/settings/parameters.hpp>
#include <emergent/tasks/cellular_automaton.hpp>
#include <emergent/tasks/dyck.hpp>
#include <emergent/tasks/linear_map.hpp>
#include <emergent/tasks/neural_cellular_automaton.hpp>
#include <emergent/tasks/task.hpp>
#include <string>
#include <vector>

namespace emergent {

struct TaskDeclaration {
  std::string name;
  std::vector<Parameter> parameters;
  Shape default_shape;  // vocab 0: the task's vocabulary; max_len 0: chosen to fit
  TaskSetup (*setup)(const ParameterValues&);
};

template <class Task>
TaskDeclaration declare_task() {
  return {Task::task_name, Task::parameters(), Task::default_shape(), &Task::setup};
}

inline const std::vector<TaskDeclaration>& task_registry() {
  static const std::vector<TaskDeclaration> tasks = {
      declare_task<LinearMap>(),
      declare_task<CellularAutomaton>(),
      declare_task<NeuralCellularAutomaton>(),
      declare_task<Dyck>(),
  };
  return tasks;
}

inline std::string task_names() {
  std::string names;
  for (const TaskDeclaration& t : task_registry()) names += (names.empty() ? "" : ", ") + t.name;
  return names;
}

inline const TaskDeclaration& find_task(const std::string& name, const std::string& where) {
  for (const TaskDeclaration& t : task_registry())
    if (t.name == name) return t;
  throw Error(where + ": field 'task' = '" + name + "' is not allowed: expected one of " +
              task_names());
}

}  // namespace emergent
